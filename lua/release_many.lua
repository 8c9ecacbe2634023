-- release_many.lua: drop one hold each of many mutex holds in one call, each exactly
-- as release.lua does (after release_hold.lua). Background releases (guards dropped
-- without unlock) that are pending together go out together.
--
-- KEYS     per hold, its lock key and its queue of waiting clients (on a cluster, all
--          in one slot)
-- ARGV[1]  "spublish" to tell release channels as shard channels; else PUBLISH
-- ARGV     then one owner id per hold, in the order of KEYS
--
-- Returns, per hold in order, the owner's remaining hold count (0: the key was
-- deleted and any waiters told), -1 if the owner held nothing, or -2 if the key holds
-- another kind of value (nothing written for it; the others are released all the
-- same).
local publish = ARGV[1] == 'spublish' and 'spublish' or 'publish'
local replies = {}
for i = 1, #ARGV - 1 do
  local key, clients, owner = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  -- A background release is most likely the last one (its guard held the hold).
  local ok, reply = pcall(release.hold, key, clients, owner, publish, true)
  replies[i] = ok and reply or -2
end
return replies
