-- release_many.lua: drop one hold each of many mutex holds in one call, each exactly
-- as release.lua does (waiters are told on each lock's release channel). Background
-- releases (guards dropped without unlock) that are pending together go out together.
--
-- KEYS     the lock keys (on a cluster, all in one slot)
-- ARGV[1]  "spublish" to tell release channels as shard channels; else PUBLISH
-- ARGV     then one owner id per key, in the order of KEYS
--
-- Returns, per key in order, the owner's remaining hold count (0: the key was deleted
-- and any waiters told), -1 if the owner held nothing, or -2 if the key holds another
-- kind of value (nothing written for it; the others are released all the same).
local publish = ARGV[1] == 'spublish' and 'spublish' or 'publish'
local replies = {}
for i, key in ipairs(KEYS) do
  local owner = ARGV[i + 1]
  local reply
  local fields = redis.pcall('hmget', key, owner, 'waiting')
  if fields.err then
    reply = -2
  elseif not fields[1] then
    reply = -1
  else
    local count = tonumber(fields[1]) - 1
    if count > 0 then
      reply = redis.call('hincrby', key, owner, -1)
    else
      -- Only one owner can hold a lock, so its last hold frees the whole key.
      redis.call('del', key)
      if fields[2] then
        redis.call(publish, key .. ':released', fields[2])
      end
      reply = 0
    end
  end
  replies[i] = reply
end
return replies
