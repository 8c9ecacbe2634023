-- release.lua: drop one hold of a reentrant hash lock.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to tell the release channel (KEYS[1] .. ":released", in the
--          key's slot) as a shard channel (Redis 7.0+); else PUBLISH
-- ARGV[3]  the caller's own count of its holds: "1" tries the last release's path
--          first. Only a hint: the reply is the same either way.
--
-- The lease is left as it is: the acquisition or the watchdog's last renewal set it,
-- and that is what the holder counts on.
--
-- Returns the owner's remaining hold count (0: the key was deleted and the
-- channel told), or -1 if the owner holds nothing.
local key, owner = KEYS[1], ARGV[1]
local count
if ARGV[3] == '1' then
  -- Most likely the last hold: a read, not a write, finds out.
  local value = redis.call('hget', key, owner)
  if not value then
    return -1
  end
  count = tonumber(value) > 1 and redis.call('hincrby', key, owner, -1) or 0
else
  count = redis.call('hincrby', key, owner, -1)
  if count < 0 then
    -- The owner held nothing, and HINCRBY created its field: take it back (an
    -- emptied hash is deleted with it).
    redis.call('hdel', key, owner)
    return -1
  end
end
if count > 0 then
  return count
end
-- Only one owner can hold a lock, so its last hold frees the whole key (and the
-- `token` field of a fenced hold with it).
redis.call('del', key)
redis.call(ARGV[2] == 'spublish' and 'spublish' or 'publish', key .. ':released', 'released')
return 0
