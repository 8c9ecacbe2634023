-- election_resign.lua: a leader steps down: its record is deleted and the change
-- announced (the caller then releases the election's fair lock, which hands it to the
-- next candidate).
--
-- KEYS[1]  the election's fair lock (see election_elect.lua)
-- ARGV[1]  the leader's owner id
-- ARGV[2]  "spublish" to announce on a shard channel; else PUBLISH
-- ARGV[3]  the election's channel (same hash slot as KEYS[1])
--
-- Announces "resigned <token> <since> <at> <owner> <data>", only if the record names
-- the owner. Idempotent.
--
-- Returns 1 if the owner's record was deleted, 0 if it was not the recorded leader.
-- Raises WRONGTYPE if KEYS[1] holds another type.
if redis.replicate_commands then
  redis.replicate_commands()
end
local key, owner = KEYS[1], ARGV[1]
local record = redis.call('hmget', key, 'leader', 'data', 'since', 'token')
if record[1] ~= owner then
  return 0
end
redis.call('hdel', key, 'leader', 'data', 'since')
local time = redis.call('time')
local now = string.format('%d', tonumber(time[1]) * 1000000 + tonumber(time[2]))
local publish = ARGV[2] == 'spublish' and 'spublish' or 'publish'
local message = { 'resigned', record[4] or '0', record[3] or '0', now, owner, record[2] or '' }
redis.call(publish, ARGV[3], table.concat(message, ' '))
return 1
