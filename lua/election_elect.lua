-- election_elect.lua: record the candidate that holds an election's fair lock as its
-- leader, and announce it.
--
-- KEYS[1]  the election's fair lock (a hash, see fair_queue.lua). The leader's record
--          is kept in it, in the fields `leader` (owner id), `data` and `since` (the
--          server's clock in microseconds), beside the owner's hold count and the
--          fencing token: the record goes with the hold, deleted by the release and
--          expired with a dead leader's lease. Owner ids contain a colon; these field
--          names do not, so they are never taken for an owner.
-- ARGV[1]  the candidate's owner id
-- ARGV[2]  its data
-- ARGV[3]  "spublish" to announce on a shard channel; else PUBLISH
-- ARGV[4]  the election's channel (same hash slot as KEYS[1])
--
-- Announces "elected <token> <since> <at> <owner> <data>" (<at>: when it was
-- announced, by the same clock). Idempotent: a second run for the same owner finds
-- its record and announces nothing.
--
-- Returns { since, token } of the record (as decimal strings), or 0 if the candidate
-- does not hold the lock (its hold was lost).
-- Raises WRONGTYPE if KEYS[1] holds another type.
if redis.replicate_commands then
  -- Redis < 5 must replicate this script's effects, as it reads TIME.
  redis.replicate_commands()
end
local key, owner = KEYS[1], ARGV[1]
if redis.call('hexists', key, owner) == 0 then
  return 0
end
local record = redis.call('hmget', key, 'leader', 'since', 'token')
local token = record[3] or '0'
if record[1] == owner then
  return { record[2] or '0', token }
end
local time = redis.call('time')
local now = string.format('%d', tonumber(time[1]) * 1000000 + tonumber(time[2]))
redis.call('hset', key, 'leader', owner, 'data', ARGV[2], 'since', now)
local publish = ARGV[3] == 'spublish' and 'spublish' or 'publish'
redis.call(publish, ARGV[4], table.concat({ 'elected', token, now, now, owner, ARGV[2] }, ' '))
return { now, token }
