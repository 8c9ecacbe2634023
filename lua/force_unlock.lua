-- force_unlock.lua: break a lock of any kind whoever holds it, and wake its waiters
-- (after fair_queue.lua and leases.lua).
--
-- KEYS     as inspect.lua: the lock's hash, then the sorted sets of its kind
-- ARGV[1]  "spublish" to tell the release channel (KEYS[1] .. ":released") as a shard
--          channel (Redis 7.0+); else PUBLISH
-- ARGV[2]  the kind: "mutex", "fair", "rw" or "semaphore"
-- ARGV[3]  the fair lock's claim window in milliseconds
-- ARGV[4]  the start of a client's own channel (`<prefix>client:`, see
--          src/waiting.rs), and ARGV[5] the message to tell each client whose holds
--          this breaks (the lock as the client's registry files it)
-- ARGV[6]  the channel to tell, if not KEYS[1] .. ":released" (Redisson's layout: see
--          src/compat.rs), and ARGV[7..] the messages to tell it, in order
--
-- mutex:         deletes the hash and publishes a message naming no client (see
--                release.lua): every waiter's client tries at once.
-- fair:          deletes the hash (the holder, or a grant not yet claimed, and its
--                token) and hands the lock to the first live waiter, as a release
--                does (see fair_queue.lua): the queue keeps its order. A queue whose
--                lock is gone (a hand-off that expired unclaimed) is handed on too.
-- rw, semaphore: deletes the hash and the leases (every reader and the writer, every
--                permit) if a holder's lease is still running, and publishes a message
--                naming no client (as rw_release.lua and sem_release.lua do): every
--                waiting client's head waiter tries at once.
-- Every client with a field in the hash (`<client id>:...`: a holder, or a fair
-- lock's waiter handed the lock) is told on its own channel (a plain PUBLISH: it
-- reaches every node of a cluster), so that it marks its holds lost within a round
-- trip; one that misses the message learns at its next renewal, which finds its field
-- gone.
--
-- Returns 1 if a lock was held (and is now free or handed on), 0 if there was none.
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local key, publish, kind = KEYS[1], ARGV[1], ARGV[2]
local leases = leases_functions()
local wrong = leases.wrong_type(KEYS)
if wrong then
  return wrong
end
-- Tells each client with a field in the hash, once (call before deleting it).
local function tell_holders()
  local told = {}
  local fields = redis.call('hgetall', key)
  for i = 1, #fields, 2 do
    local client = string.match(fields[i], '^(%x+%-%x+%-%x+%-%x+%-%x+):')
    if client and not told[client] then
      told[client] = true
      redis.call('publish', ARGV[4] .. client, ARGV[5])
    end
  end
end
if kind == 'fair' then
  tell_holders()
  local held = redis.call('del', key)
  local now_ms = fair.now()
  fair.drop_dead_waiters(now_ms)
  fair.hand_to_first(publish, ARGV[3], now_ms)
  return held
end
if kind == 'mutex' then
  if redis.call('hlen', key) == 0 then
    return 0
  end
  tell_holders()
  redis.call('del', key)
else
  -- (A read-write lock's lone holder, `solo`, is the hash's expiry: held while the
  -- hash lasts.)
  if not redis.call('hget', key, 'solo') and redis.call('zcount', KEYS[2], '(' .. leases.now(), '+inf') == 0 then
    return 0
  end
  tell_holders()
  redis.call('del', key, KEYS[2])
end
local command = publish == 'spublish' and 'spublish' or 'publish'
if not ARGV[6] then
  redis.call(command, key .. ':released', 'released')
end
for i = 7, #ARGV do
  redis.call(command, ARGV[6], ARGV[i])
end
return 1
