-- election_leader.lua: who leads an election, read in one step with whether that
-- leader still holds the election's fair lock (a record outlives no hold: see
-- election_elect.lua; the check keeps that true whatever else writes the hash).
--
-- KEYS[1]  the election's fair lock
--
-- Returns { now } when nobody leads, else { now, owner, data, since, token, pttl }:
-- now and since are the server's clock in microseconds (decimal strings), token the
-- leader's fencing token, pttl the lease left on its hold in ms (-1: none).
-- Raises WRONGTYPE if KEYS[1] holds another type.
local time = redis.call('time')
local now = string.format('%d', tonumber(time[1]) * 1000000 + tonumber(time[2]))
local key = KEYS[1]
local record = redis.call('hmget', key, 'leader', 'data', 'since', 'token')
if not record[1] or redis.call('hexists', key, record[1]) == 0 then
  return { now }
end
return { now, record[1], record[2] or '', record[3] or '0', record[4] or '0', redis.call('pttl', key) }
