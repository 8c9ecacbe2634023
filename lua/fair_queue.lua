-- fair_queue.lua: the queue of a fair lock, put in front of fair_acquire.lua,
-- fair_release.lua and fair_leave.lua (one copy of the hand-off for the three).
--
-- KEYS[1]  lock key (hash: owner id -> hold count, as the mutex; plus the field
--          `claim` = "<owner id> <wait>", the wait the lock was handed to, until a
--          claim attempt takes the lock afresh)
-- KEYS[2]  the queue (sorted set: "<owner id> <wait>" -> when that wait began, in
--          microseconds by this server's clock: its place). <wait> is a number the
--          client gives each wait, so each wait of an owner is an entry of its own
-- KEYS[3]  the waiters' liveness (sorted set: "<owner id> <wait>" -> deadline in ms; a
--          wait refreshes it with every attempt, and one that stops is dropped after
--          it)
if redis.replicate_commands then
  -- Redis < 5 must replicate these scripts' effects, as they read TIME.
  redis.replicate_commands()
end
local fair = {}

-- The server's clock: milliseconds, and microseconds.
function fair.now()
  local time = redis.call('time')
  local seconds, micros = tonumber(time[1]), tonumber(time[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros
end

-- Drops the waiters whose liveness deadline has passed (they died or left).
function fair.drop_dead_waiters(now_ms)
  local gone = redis.call('zrangebyscore', KEYS[3], '-inf', now_ms)
  for _, waiter in ipairs(gone) do
    redis.call('zrem', KEYS[2], waiter)
  end
  if #gone > 0 then
    redis.call('zremrangebyscore', KEYS[3], '-inf', now_ms)
  end
end

-- Hands the free lock to the first live wait, if any: its owner's field (count 1)
-- and `claim` are set, the key lives for the claim window, and the message names the
-- wait ("<owner id> <wait>"). The wait may take the lock on the message alone if its
-- last refused attempt reported it queued (see src/fair.rs); else its next attempt
-- claims it. Returns that wait, or nil.
function fair.hand_to_first(publish, window)
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if head then
    local owner = string.match(head, '^(%S+) ') or head
    redis.call('hset', KEYS[1], owner, 1, 'claim', head)
    redis.call('pexpire', KEYS[1], window)
    redis.call('zrem', KEYS[2], head)
    redis.call('zrem', KEYS[3], head)
    redis.call(publish == 'spublish' and 'spublish' or 'publish', KEYS[1] .. ':released', head)
  end
  return head
end
