-- fair_leave.lua: a wait for a fair lock ends without the lock (it gave up, or was
-- cancelled) (after fair_queue.lua).
--
-- KEYS     see fair_queue.lua
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to tell the release channel as a shard channel; else PUBLISH
-- ARGV[3]  claim window in milliseconds
-- ARGV[4]  the wait that ends (see fair_acquire.lua, ARGV[6])
--
-- Takes that wait's entry out of the queue; if the lock was handed to that wait and not
-- claimed, hands it on to the next live waiter at once. Touches nothing of any other
-- wait, a later wait of the same owner included: that one queues as its own entry and
-- may hold its own grant already. Idempotent.
-- Returns 1 if a lock handed to the wait was handed on, else 0.
local key, waiter = KEYS[1], ARGV[1] .. ' ' .. ARGV[4]
fair.unqueue(waiter)
if redis.call('hget', key, 'claim') ~= waiter then
  return 0
end
redis.call('del', key)
local now_ms = fair.now()
fair.drop_dead_waiters(now_ms)
fair.hand_to_first(ARGV[2], ARGV[3], now_ms)
return 1
