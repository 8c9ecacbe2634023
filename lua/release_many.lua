-- release_many.lua: drop one hold each of many mutex holds in one call, each exactly
-- as release.lua does (after release_hold.lua). Background releases (guards dropped
-- without unlock) that are pending together go out together.
--
-- KEYS     the first hold's lock key and its queue of waiting clients: on a cluster
--          they route the call to the node serving their slot
-- ARGV[1]  "spublish" to tell release channels as shard channels; else PUBLISH
-- ARGV     then per hold: its lock key and the owner id. Its queue of waiting clients
--          is its key followed by ":clients" (src/keys.rs), read only if someone
--          waits (see acquire_many.lua: each argument costs the server)
--
-- On a cluster a call carries the holds of one node, of any of its slots (see
-- acquire_many.lua): a hold whose slot moved away is refused by the node before
-- anything is written for it.
--
-- Returns, per hold in order, the owner's remaining hold count (0: the key was
-- deleted and any waiters told), -1 if the owner held nothing, -2 if the key holds
-- another kind of value, or -3 if this node does not serve the key (for these two,
-- nothing was written for it; the others are released all the same).
local publish = ARGV[1] == 'spublish' and 'spublish' or 'publish'
local replies = {}
for i = 1, (#ARGV - 1) / 2 do
  local key, owner = ARGV[2 * i], ARGV[2 * i + 1]
  -- A batched release is most likely the last one (its guard held the hold).
  local ok, reply = pcall(release.hold, key, nil, owner, publish, true)
  if ok then
    replies[i] = reply
  elseif string.find(tostring(type(reply) == 'table' and reply.err or reply), 'WRONGTYPE', 1, true) then
    replies[i] = -2
  else
    replies[i] = -3
  end
end
return replies
