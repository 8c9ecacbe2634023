-- renew_many.lua: extend the leases of many holds in one call, each as renew.lua or
-- lease_renew.lua would (after leases.lua). The watchdog sends the renewals that fall
-- due together in one call; on a cluster every key of one call is in one slot.
--
-- Two forms of arguments:
--
-- * The common one, when every hold's key expires as a whole (mutex, fair lock) and
--   all have one lease: KEYS the holds' keys, the holds of one holder next to each
--   other; ARGV[1] "*h", ARGV[2] the lease in milliseconds, then one pair per run of
--   keys with one holder, in order: the holder field and how many keys it holds.
-- * Any mix: KEYS the holds' keys, in order: one key (the lock's hash) for a hold whose
--   key expires as a whole, two (the hash and its leases, see leases.lua) for a holder
--   that expires on its own (semaphore, read-write); ARGV one triple per hold: layout
--   ("h": one key, "l": two keys, "r": one key, a reader in the layout of Redisson's
--   RReadWriteLock, see redisson/rw_acquire.lua, "p": one key, a permit in the layout
--   of Redisson's RPermitExpirableSemaphore, see redisson/sem_acquire.lua), holder
--   field, lease in milliseconds.
--
-- Returns one character per hold, in order, as one string (a reply of 256 numbers costs
-- both ends more to write and read): '1' if its lease was extended, '0' if the holder
-- holds nothing, 'x' if its keys hold another kind of value (nothing written for it;
-- the other holds are renewed all the same).

-- A hold whose key expires as a whole.
local function renew_whole(key, holder, lease)
  local found = redis.pcall('hexists', key, holder)
  if type(found) ~= 'number' then
    return 'x'
  elseif found == 1 then
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
  local held = redis.pcall('hget', key, holder)
  if type(held) == 'table' then
    return 'x'
  elseif not held then
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
  local deadline = redis.pcall('zscore', deadlines, holder)
  if type(deadline) == 'table' then
    return 'x'
  end
  local now = redisson.now()
  if not deadline or tonumber(deadline) <= now then
    return '0'
  end
  redis.call('zadd', deadlines, now + tonumber(lease), holder)
  return '1'
end

local replies = {}
if ARGV[1] == '*h' then
  local lease = ARGV[2]
  local k = 1
  for i = 3, #ARGV, 2 do
    local holder = ARGV[i]
    for _ = 1, tonumber(ARGV[i + 1]) do
      replies[k] = renew_whole(KEYS[k], holder, lease)
      k = k + 1
    end
  end
  return table.concat(replies)
end

local k = 1
local now, leases
for i = 1, #ARGV, 3 do
  local layout, holder, lease = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local reply
  if layout == 'h' then
    reply = renew_whole(KEYS[k], holder, lease)
    k = k + 1
  elseif layout == 'r' then
    reply = renew_reader(KEYS[k], holder, lease)
    k = k + 1
  elseif layout == 'p' then
    reply = renew_permit(KEYS[k], holder, lease)
    k = k + 1
  else
    local key, set = KEYS[k], KEYS[k + 1]
    k = k + 2
    leases = leases or leases_functions()
    if leases.wrong_type({key, set}) then
      reply = 'x'
    else
      now = now or leases.now()
      leases.drop_expired(key, set, now)
      if redis.call('hexists', key, holder) == 0 then
        reply = '0'
      else
        leases.hold_until(key, set, holder, now + tonumber(lease))
        reply = '1'
      end
    end
  end
  replies[#replies + 1] = reply
end
return table.concat(replies)
