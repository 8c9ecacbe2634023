-- release_many.lua: drop one hold each of many mutex holds in one call, each exactly
-- as release.lua does (after release_hold.lua). Unlocks that many tasks of one client
-- start at once, and background releases (guards dropped without unlock) that are
-- pending together, go out together.
--
-- KEYS     the first hold's lock key and its queue of waiting clients: on a cluster
--          they route the call to the node serving their slot
-- ARGV[1]  "spublish" to tell release channels as shard channels; else PUBLISH
-- ARGV[2]  "1" to delete every freed lock nobody waits for with one DEL at the end
--          (a single server: one command may name keys of any slot); "0" on a
--          cluster, where each is deleted as it is freed
-- ARGV     then per hold: its lock key, its queue of waiting clients, the owner id
--
-- On a cluster a call carries the holds of one node, of any of its slots (see
-- acquire_many.lua): a hold whose slot moved away is refused by the node before
-- anything is written for it.
--
-- The usual batch on a single server frees locks nobody waited for: 1 redis.call
-- per hold (HMGET) and one DEL in all; on a cluster 2 per hold (HMGET, DEL).
--
-- Returns, per hold in order, the owner's remaining hold count (0: the key was
-- deleted and any waiters told), -1 if the owner held nothing, -2 if the key holds
-- another kind of value, or -3 if this node does not serve the key (for these two,
-- nothing was written for it; the others are released all the same).
local publish = ARGV[1] == 'spublish' and 'spublish' or 'publish'
local doomed = ARGV[2] == '1' and {} or nil
-- The keys freed so far: a later hold of one of them finds it gone, as it would
-- have been had it been deleted at once.
local freed = {}
local replies = {}
for i = 1, (#ARGV - 2) / 3 do
  local key, clients, owner = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  if freed[key] then
    replies[i] = -1
  else
    -- A batched release is most likely the last one (its guard held the hold).
    local ok, reply = pcall(release.hold, key, clients, owner, publish, true, doomed)
    if ok then
      replies[i] = reply
      if reply == 0 then
        freed[key] = true
      end
    elseif string.find(tostring(type(reply) == 'table' and reply.err or reply), 'WRONGTYPE', 1, true) then
      replies[i] = -2
    else
      replies[i] = -3
    end
  end
end
-- In slices: Lua's stack takes a few thousand arguments at most.
if doomed then
  for first = 1, #doomed, 1000 do
    redis.call('del', unpack(doomed, first, math.min(first + 999, #doomed)))
  end
end
return replies
