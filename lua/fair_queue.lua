-- fair_queue.lua: the queue of a fair lock, put in front of fair_acquire.lua,
-- fair_release.lua and fair_leave.lua (one copy of the hand-off for the three).
--
-- KEYS[1]  lock key (hash: owner id -> hold count, as the mutex; plus the field
--          `claim` = "<owner id> <wait>", the wait the lock was handed to, until a
--          claim attempt takes the lock afresh)
-- KEYS[2]  the queue (sorted set: "<owner id> <wait>" -> when that wait began, in
--          microseconds by this server's clock: its place). <wait> is a number the
--          client gives each wait, so each wait of an owner is an entry of its own
-- KEYS[3]  the waiting clients' liveness (sorted set: client id -> deadline in ms).
--          A client id is its owner ids' part before the first colon. Any attempt of
--          any of a client's waits moves the deadline a place window on, for all of
--          them: a client makes one attempt per third of that window for all its waits,
--          and a client that stops (it died) has all its waits dropped after it
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

-- The client an owner id (or a queue entry, "<owner id> <wait>") belongs to.
function fair.client_of(owner)
  return string.match(owner, '^[^:]*')
end

-- Takes `waiter` out of the queue. With nobody left queued, no client's liveness
-- matters: it goes too, so an idle lock leaves no key behind.
function fair.unqueue(waiter)
  redis.call('zrem', KEYS[2], waiter)
  if redis.call('zcard', KEYS[2]) == 0 then
    redis.call('del', KEYS[3])
  end
end

-- Drops the waits of the clients whose liveness deadline has passed (they died, or
-- have not waited here since). Finding a dead client's waits reads the whole queue,
-- which happens once per client that stops waiting.
function fair.drop_dead_waiters(now_ms)
  local gone = redis.call('zrangebyscore', KEYS[3], '-inf', now_ms)
  if #gone == 0 then
    return
  end
  redis.call('zremrangebyscore', KEYS[3], '-inf', now_ms)
  local dead = {}
  for _, client in ipairs(gone) do
    dead[client] = true
  end
  for _, waiter in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
    -- (An older version kept one deadline per wait, under the wait's own entry.)
    if dead[fair.client_of(waiter)] or dead[waiter] then
      fair.unqueue(waiter)
    end
  end
end

-- Hands the free lock to the first live wait, if any: its owner's field (count 1)
-- and `claim` are set, the key lives for the claim window from `now_ms` (this
-- server's clock, read by the calling script), and the message names the wait and
-- that time ("<owner id> <wait> <now_ms>"), on the channel of the wait's client alone
-- ("<lock key>:released:<client id>"). The wait may take the lock on the message alone
-- (see src/fair.rs); else its next attempt claims it. Returns that wait, or nil.
function fair.hand_to_first(publish, window, now_ms)
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if head then
    local owner = string.match(head, '^(%S+) ') or head
    redis.call('hset', KEYS[1], owner, 1, 'claim', head)
    redis.call('pexpire', KEYS[1], window)
    fair.unqueue(head)
    local message = head .. ' ' .. string.format('%d', now_ms)
    local channel = KEYS[1] .. ':released:' .. fair.client_of(head)
    redis.call(publish == 'spublish' and 'spublish' or 'publish', channel, message)
  end
  return head
end

-- Tells the client of the first wait in the queue, unless it is `owner`'s (which knows),
-- when the fresh hold `owner` just took runs out, if its `lease` (ms, from `now_ms`,
-- this server's clock) is shorter than a third of the place window (a client's refresh
-- period): an expiry publishes nothing, and that client's next attempt, which hands
-- the expired lock on, might come only at its next refresh, well after the lease ran
-- out. A longer lease is learned by that refresh in time. The message is
-- "lease <now_ms> <lease>", on that client's channel.
function fair.tell_next(publish, owner, lease, now_ms, place_window)
  if lease * 3 >= place_window then
    return
  end
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if not head or fair.client_of(head) == fair.client_of(owner) then
    return
  end
  local message = string.format('lease %d %d', now_ms, lease)
  local channel = KEYS[1] .. ':released:' .. fair.client_of(head)
  redis.call(publish == 'spublish' and 'spublish' or 'publish', channel, message)
end
