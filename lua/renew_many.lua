-- renew_many.lua: extend the leases of many holds in one call, each as renew.lua or
-- lease_renew.lua would (after leases.lua). The watchdog sends the renewals that fall
-- due together in one call; on a cluster a call carries the holds of one node, of any
-- of its slots (as acquire_many.lua does).
--
-- KEYS the first hold's keys: on a cluster they route the call to the node serving
-- their slot. Every hold's keys, the first's too, come in ARGV, in one of two forms:
--
-- * The common one, when every hold's key expires as a whole (mutex, fair lock) and
--   all have one lease: ARGV[1] "*h", ARGV[2] the lease in milliseconds, then per run
--   of holds with one holder, in order: the holder field, how many holds it has, and
--   that many keys (the locks' hashes).
-- * Any mix: per hold, in order: its layout ("h": one key, the lock's hash, which
--   expires as a whole; "l": two keys, the hash and its leases, see leases.lua, for a
--   holder that expires on its own, semaphore or read-write; "r": one key, a reader in
--   the layout of Redisson's RReadWriteLock, see redisson/rw_acquire.lua; "p": one
--   key, a permit in the layout of Redisson's RPermitExpirableSemaphore, see
--   redisson/sem_acquire.lua), the holder field, the lease in milliseconds, then its
--   key or keys.
--
-- Returns one character per hold, in order, as one string (a reply of 256 numbers costs
-- both ends more to write and read): '1' if its lease was extended, '0' if the holder
-- holds nothing, 'x' if its keys hold another kind of value, 'm' if this node does not
-- serve its keys (its slot moved away since the client last learned the cluster's
-- layout: the node refuses the first read, so for these two nothing was written for it;
-- the other holds are renewed all the same).

-- A hold whose key expires as a whole.
local function renew_whole(key, holder, lease)
  if redis.call('hexists', key, holder) == 1 then
    redis.call('pexpire', key, lease)
    return '1'
  end
  return '0'
end

-- Made for the first hold of Redisson's layouts (see redisson/layout.lua).
local redisson

-- A reader of a read-write lock in Redisson's layout: each of its holds' timeout keys
-- and the hash (never shortened: it lives as long as its longest hold), as Redisson's
-- read-lock renewal does.
local function renew_reader(key, holder, lease)
  local held = redis.call('hget', key, holder)
  if not held then
    return '0'
  end
  redisson = redisson or redisson_functions()
  for n = tonumber(held), 1, -1 do
    redis.call('pexpire', redisson.beside(key, holder .. ':rwlock_timeout:' .. n), lease)
  end
  redis.call('pexpire', key, math.max(redis.call('pttl', key), tonumber(lease)))
  return '1'
end

-- A permit in Redisson's semaphore layout: its deadline, in the sorted set beside the
-- semaphore, moved a lease on from now, unless it has passed (the permit may have been
-- given back by another's acquire already).
local function renew_permit(key, holder, lease)
  redisson = redisson or redisson_functions()
  local deadlines = redisson.beside(key, 'timeout')
  local deadline = redis.call('zscore', deadlines, holder)
  local now = redisson.now()
  if not deadline or tonumber(deadline) <= now then
    return '0'
  end
  redis.call('zadd', deadlines, now + tonumber(lease), holder)
  return '1'
end

-- Renews one hold with `renew` (one of the functions above, or `renew_own` below),
-- answering 'x' or 'm' for a hold whose first read fails (see the header).
local function each(renew, ...)
  local ok, reply = pcall(renew, ...)
  if ok then
    return reply
  end
  local message = type(reply) == 'table' and reply.err or tostring(reply)
  return string.find(message, 'WRONGTYPE', 1, true) and 'x' or 'm'
end

local now, leases

-- A holder whose deadline is its own, in a hash and its leases (see leases.lua).
local function renew_own(key, set, holder, lease)
  leases = leases or leases_functions()
  local wrong = leases.wrong_type({key, set})
  if wrong then
    return 'x'
  end
  now = now or leases.now()
  leases.drop_expired(key, set, now)
  if redis.call('hexists', key, holder) == 0 then
    return '0'
  end
  leases.hold_until(key, set, holder, now + tonumber(lease))
  return '1'
end

local replies = {}
if ARGV[1] == '*h' then
  local lease = ARGV[2]
  local i = 3
  while i <= #ARGV do
    local holder, count = ARGV[i], tonumber(ARGV[i + 1])
    for k = i + 2, i + 1 + count do
      replies[#replies + 1] = each(renew_whole, ARGV[k], holder, lease)
    end
    i = i + 2 + count
  end
  return table.concat(replies)
end

local renewers = {h = renew_whole, r = renew_reader, p = renew_permit}
local i = 1
while i <= #ARGV do
  local layout, holder, lease = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if layout == 'l' then
    replies[#replies + 1] = each(renew_own, ARGV[i + 3], ARGV[i + 4], holder, lease)
    i = i + 5
  else
    replies[#replies + 1] = each(renewers[layout], ARGV[i + 3], holder, lease)
    i = i + 4
  end
end
return table.concat(replies)
