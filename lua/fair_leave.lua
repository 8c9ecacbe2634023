-- fair_leave.lua: a waiter of a fair lock stops waiting (it gave up, or was
-- cancelled) (after fair_queue.lua).
--
-- KEYS     see fair_queue.lua
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to tell the release channel as a shard channel; else PUBLISH
-- ARGV[3]  claim window in milliseconds
-- ARGV[4]  the place the waiter last knew it held ("" if none was reported)
--
-- Leaves the queue; if the lock was handed to this waiter at that place and not
-- claimed, hands it on to the next live waiter at once. A grant to a later wait of
-- the same owner (another place) is left alone: that wait may hold it already; and
-- without a place, a grant is left to expire within the claim window. Idempotent.
-- Returns 1 if a lock handed to the waiter was handed on, else 0.
local key, owner = KEYS[1], ARGV[1]
redis.call('zrem', KEYS[2], owner)
redis.call('zrem', KEYS[3], owner)
if ARGV[4] == '' or redis.call('hget', key, 'claim') ~= owner .. ' ' .. ARGV[4] then
  return 0
end
redis.call('del', key)
fair.drop_dead_waiters(fair.now())
fair.hand_to_first(ARGV[2], ARGV[3])
return 1
