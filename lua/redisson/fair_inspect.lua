-- redisson/fair_inspect.lua: read a fair lock in the layout of Redisson's RFairLock
-- (see redisson/fair_acquire.lua) for the operator, changing nothing, answering as
-- inspect.lua does holdlock's.
--
-- KEYS[1]  lock key, KEYS[2] the queue, KEYS[3] the waiters' deadlines
--
-- Returns { PTTL of KEYS[1], its fields and values, this server's clock in
-- milliseconds, { the queue's waiters in order as { owner, 0, owner, 0, ... }, {} } }:
-- Redisson records no time a wait began (0), and a waiter whose deadline passed at the
-- head is left out (the next script that changes the lock drops it).
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local redisson = redisson_functions()
local wrong = redisson.wrong_type({ 'hash', 'list', 'zset' })
if wrong then
  return wrong
end
local now = redisson.now()
local queue, stale = {}, true
for _, owner in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
  local deadline = redis.call('zscore', KEYS[3], owner)
  stale = stale and deadline and tonumber(deadline) <= now
  if not stale then
    queue[#queue + 1] = owner
    queue[#queue + 1] = '0'
  end
end
return { redis.call('pttl', KEYS[1]), redis.call('hgetall', KEYS[1]), now, { queue, {} } }
