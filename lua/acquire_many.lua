-- acquire_many.lua: take many free mutexes in one call, each only as acquire.lua's
-- first path would: a lock that is free and nobody queues for, taken for an owner
-- that asks for no token, data or hints. Anything else is left untouched, for
-- acquire.lua to answer (and, for a waiter, to mark the lock and queue its client).
-- Acquisitions that many tasks of one client start at once go out together.
--
-- KEYS     the first lock's key and its queue of waiting clients: on a cluster they
--          route the call to the node serving their slot
-- ARGV[1]  "1" to read every lock with one EXISTS first (a single server: one
--          command may name keys of any slot); "0" on a cluster
-- ARGV     then per lock: its key, its queue (see acquire.lua), the owner id, the
--          lease in milliseconds
--
-- On a cluster a call carries the locks of one node, of any of its slots: a script
-- without a shebang may touch any key its node serves (Redis 7 and Valkey keep that
-- for such scripts), one command at a time. A lock whose slot moved away since the
-- client last learned the cluster's layout is refused by the node ("non local key")
-- before anything is written for it, and is left untouched: acquire.lua, routed to
-- its slot, answers it.
--
-- The usual batch on a single server finds every lock free and nobody queuing with
-- its first EXISTS: then it takes 2 redis.calls per lock (HSET, PEXPIRE) and 1 in all.
-- Otherwise, and on a cluster, 3 per lock taken (EXISTS of both keys, HSET, PEXPIRE)
-- and 1 per lock left.
--
-- Returns, per lock in order, 1 if it was taken (hold count 1, no token) or 0 if
-- nothing was done. A key of another type is not free: 0, and acquire.lua names it.
local locks = (#ARGV - 1) / 4
local taken = {}

-- Takes lock `i`, known to be free and queued for by nobody.
local function take(i)
  local key = ARGV[4 * i - 2]
  redis.call('hset', key, ARGV[4 * i], 1)
  redis.call('pexpire', key, ARGV[4 * i + 1])
  taken[i] = 1
end

if ARGV[1] == '1' then
  local keys = {}
  for i = 1, locks do
    keys[2 * i - 1], keys[2 * i] = ARGV[4 * i - 2], ARGV[4 * i - 1]
  end
  if redis.call('exists', unpack(keys)) == 0 then
    -- A lock named twice is taken by its first owner only.
    local named = {}
    for i = 1, locks do
      local key = ARGV[4 * i - 2]
      if named[key] then
        taken[i] = 0
      else
        named[key] = true
        take(i)
      end
    end
    return taken
  end
end
for i = 1, locks do
  -- A number if the node serves the keys, else an error: nothing done.
  if redis.pcall('exists', ARGV[4 * i - 2], ARGV[4 * i - 1]) == 0 then
    take(i)
  else
    taken[i] = 0
  end
end
return taken
