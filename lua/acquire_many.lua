-- acquire_many.lua: take many free mutexes in one call, each only as acquire.lua's
-- first path would: a lock that is free and nobody queues for, taken for an owner
-- that asks for no token, data or hints. Anything else is left untouched, for
-- acquire.lua to answer (and, for a waiter, to mark the lock and queue its client).
-- Acquisitions that many tasks of one client start at once go out together.
--
-- KEYS     the first lock's key and its queue of waiting clients: on a cluster they
--          route the call to the node serving their slot
-- ARGV[1]  the lease in milliseconds, of every lock of the call
-- ARGV     then per lock: its key and the owner id. Its queue of waiting clients is
--          its key followed by ":clients" (src/keys.rs), in the key's slot.
--
-- On a cluster a call carries the locks of one node, of any of its slots: a script
-- without a shebang may touch any key its node serves (Redis 7 and Valkey keep that
-- for such scripts). A lock whose slot moved away since the client last learned the
-- cluster's layout is refused by the node ("non local key") before anything is
-- written for it, and is left untouched: acquire.lua, routed to its slot, answers it.
--
-- Takes 3 redis.calls per lock taken (EXISTS of both keys, HSET, PEXPIRE), 1 per lock
-- left. Each argument costs the server about as much as a third of a call (read,
-- copied, made a Lua string): the lease is named once and the queue not at all.
--
-- Returns, per lock in order, 1 if it was taken (hold count 1, no token) or 0 if
-- nothing was done. A key of another type is not free: 0, and acquire.lua names it.
local lease = ARGV[1]
local taken = {}
for i = 1, (#ARGV - 1) / 2 do
  local key = ARGV[2 * i]
  -- A number if the node serves the keys, else an error: nothing done.
  if redis.pcall('exists', key, key .. ':clients') == 0 then
    redis.call('hset', key, ARGV[2 * i + 1], 1)
    redis.call('pexpire', key, lease)
    taken[i] = 1
  else
    taken[i] = 0
  end
end
return taken
