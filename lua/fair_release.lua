-- fair_release.lua: drop one hold of a fair lock; the last hands the lock to the first
-- live waiter (after fair_queue.lua).
--
-- KEYS     see fair_queue.lua
-- ARGV[1]  owner id
-- ARGV[2]  "spublish" to tell the release channel as a shard channel; else PUBLISH
-- ARGV[3]  claim window in milliseconds
--
-- The hand-off is a grant: the first waiter's field is set before anyone else can ask,
-- and the message names it. A waiter that does not claim it within the window (it
-- died) loses it: the key expires, and the next attempt of any waiter hands it on.
--
-- Returns the owner's remaining hold count (0: released), or -1 if it held nothing.
local key, owner = KEYS[1], ARGV[1]
local count = redis.call('hincrby', key, owner, -1)
if count < 0 then
  redis.call('hdel', key, owner)
  return -1
end
if count > 0 then
  return count
end
redis.call('del', key)
local now_ms = fair.now()
fair.drop_dead_waiters(now_ms)
fair.hand_to_first(ARGV[2], ARGV[3], now_ms)
return 0
