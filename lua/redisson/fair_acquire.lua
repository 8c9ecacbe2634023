-- redisson/fair_acquire.lua: take a fair lock afresh in the layout of Redisson's
-- RFairLock (see src/compat.rs), as its tryLockInnerAsync does, so that Java waiters
-- and ours share one queue.
--
-- KEYS[1]  lock key (hash: field = owner id, value = hold count, as RLock's)
-- KEYS[2]  the queue of waiting owners, "redisson_lock_queue:{<key>}" (a list)
-- KEYS[3]  each waiter's deadline, "redisson_lock_timeout:{<key>}" (a sorted set of
--          owner -> milliseconds)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  how long a waiter keeps its place at the head of the queue, in
--          milliseconds: the call's wait, or Redisson's fairLockWaitTimeout (5 minutes
--          by default in Redisson 4.7; see LockClientBuilder::fair_wait_timeout)
-- ARGV[4]  "try" for a single try: a refusal queues nothing; "again" for a later
--          attempt of a wait: a caller no longer queued was dropped as a stale head
--          while it waited (only heads are dropped, and a wait leaves only as it
--          ends), so it takes the head back, ahead of those who came after it (whose
--          deadlines move a wait later)
--
-- Clock: this server's (Redisson's waiters give their own; keep the clocks in step).
-- First drops the heads of the queue whose deadline has passed (Redisson's rule: a
-- waiter that stopped asking loses its place). The lock is granted if it is free and
-- the queue is empty or headed by the caller, which leaves the queue then, every
-- deadline behind it moving one wait earlier. A refused waiting caller is queued at
-- the tail once, its deadline one wait after the deadline before it (Redisson's
-- rule), and never before the holder's lease from now plus a wait for itself and each
-- waiter ahead; each later refusal moves it that far on again if it is sooner
-- (Redisson's waiters never move theirs: one behind a holder that holds past the
-- queue's deadlines loses its place).
--
-- Granted:  { 1, 0 }
-- Busy:     { 0, ms until the caller should ask again unless told sooner: the
--             holder's PTTL, or while the lock is free, until the head's deadline }
-- Raises WRONGTYPE (naming the key) if a key holds another type; nothing is written.
local redisson = redisson_functions()
local wrong = redisson.wrong_type({ 'hash', 'list', 'zset' })
if wrong then
  return wrong
end
local key, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local owner, wait = ARGV[1], tonumber(ARGV[3])
local now = redisson.now()
redisson.drop_stale_heads(queue, deadlines, now)
local pttl = redis.call('pttl', key)
local dropped = ARGV[4] == 'again' and not redis.call('zscore', deadlines, owner)
if dropped and redis.call('hexists', key, owner) == 0 then
  -- Dropped as a stale head while waiting, most likely after a grant moved its
  -- deadline earlier by the grantee's wait (Redisson's arithmetic, where calls of
  -- different waits space the queue unevenly): first in line again. Every waiter
  -- behind is now one place further back, so its deadline moves a wait later (as
  -- the head's grant or leave moves it a wait earlier).
  redisson.move_deadlines(deadlines, wait)
  redis.call('lpush', queue, owner)
  redis.call('zadd', deadlines, now + math.max(pttl, 0) + wait, owner)
end
local head = redis.call('lindex', queue, 0)
if pttl == -2 and (not head or head == owner) then
  if head then
    redis.call('lpop', queue)
  end
  redis.call('zrem', deadlines, owner)
  redisson.move_deadlines(deadlines, -wait)
  redis.call('hset', key, owner, 1)
  redis.call('pexpire', key, ARGV[2])
  return { 1, 0 }
end
if pttl ~= -2 and redis.call('hexists', key, owner) == 1 then
  -- A field of ours still here is a hold the caller gave up as lost: start over.
  redis.call('hset', key, owner, 1)
  redis.call('pexpire', key, ARGV[2])
  return { 1, 0 }
end
if ARGV[4] ~= 'try' then
  -- Asking keeps a waiter's place: its deadline is at least the holder's lease from
  -- now, plus a wait for itself and each waiter ahead of it (each grant ahead moves
  -- it a wait earlier), so a waiter that asks again by then (ours do, at the holder's
  -- PTTL) is never dropped, however long the holder holds.
  local waiters = redis.call('lrange', queue, 0, -1)
  local ahead = #waiters
  for i, waiter in ipairs(waiters) do
    if waiter == owner then
      ahead = i - 1
      break
    end
  end
  local alive = now + math.max(pttl, 0) + wait * (ahead + 1)
  local mine = redis.call('zscore', deadlines, owner)
  if mine then
    if tonumber(mine) < alive then
      redis.call('zadd', deadlines, alive, owner)
    end
  else
    local last = redis.call('lindex', queue, -1)
    local after = last and redis.call('zscore', deadlines, last)
    local deadline = after and tonumber(after) + wait or alive
    redis.call('zadd', deadlines, math.max(deadline, alive), owner)
    redis.call('rpush', queue, owner)
    head = head or owner
  end
end
if pttl ~= -2 then
  return { 0, pttl }
end
local until_head = redis.call('zscore', deadlines, head)
return { 0, math.max(1, (until_head and tonumber(until_head) or now) - now) }
