-- release.lua: drop one hold of a reentrant hash lock (after release_hold.lua, which
-- says how).
--
-- KEYS[1]  lock key
-- KEYS[2]  the queue of waiting clients (see acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to tell the release channel (KEYS[1] .. ":released", in the
--          key's slot) as a shard channel (Redis 7.0+); else PUBLISH
-- ARGV[3]  the caller's own count of its holds (capped at 2): "1" tries the last
--          release's path first. Only a hint: the reply is the same either way.
--
-- Returns the owner's remaining hold count (0: the key was deleted and any waiters
-- told), or -1 if the owner holds nothing.
local publish = ARGV[2] == 'spublish' and 'spublish' or 'publish'
return release.hold(KEYS[1], KEYS[2], ARGV[1], publish, ARGV[3] == '1')
