-- fair_acquire.lua: take a fair lock afresh, or queue for it (after fair_queue.lua).
--
-- KEYS     see fair_queue.lua; and KEYS[4], the token floor key (same hash slot),
--          given only to draw a fencing token (see fencing.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  claim window in milliseconds: how long a waiter the lock was handed to has
--          to claim it
-- ARGV[4]  "wait" to queue when refused; anything else for a single try
-- ARGV[5]  "spublish" to tell the release channel as a shard channel; else PUBLISH
-- ARGV[6]  the caller's wait: a number no other wait of this client uses. The wait
--          queues as "<owner id> <wait>" (see fair_queue.lua), so two waits of one
--          owner are two entries: a later wait never inherits an earlier one's place
--          or grant, and the earlier wait's leave cannot touch the later's. A lock
--          handed to this wait is claimed; a hold of the owner under any other grant
--          is one it gave up (as lost, or in an earlier wait), which goes to the first
--          waiter
-- ARGV[7]  data to keep with a fresh hold (field `data:<owner>`), or empty for none
-- ARGV[8]  place window in milliseconds: how long the caller's client keeps all its
--          places in the queue without an attempt of any of its waits
-- ARGV[9..] (a client's refresh, for all its waits) the entries of the client's other
--          waits that believe they are queued: the reply says which are not
--
-- Waiters are served in the order their waits began (their first refused attempt):
-- a free lock goes to the first live waiter, never to a later caller. A lock handed to
-- a waiter (by fair_release.lua, or here when the lock was found free with others
-- first) is claimed by that waiter's next attempt, which the message naming it wakes.
-- A re-entry is `reenter.lua`, as for the mutex. A fresh hold with a lease shorter
-- than a client's refresh tells the client of the next wait when it runs out (see
-- fair.tell_next in fair_queue.lua).
--
-- Granted:  { 1, fencing token or 0 }
-- Busy:     { 0, remaining PTTL of the lock in ms (-1 if it has none) }, and if
--           queued: { 0, PTTL, the caller's place in the queue (its score, as Redis
--             prints it), this server's clock in ms, 1 if the caller's client was
--             still alive here before this attempt else 0 (its other waits' places
--             were dropped, if it had any: they must queue again), and the positions
--             (from 1) of the entries of ARGV[9..] that are not queued }
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local key, queue, alive, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local waiter = owner .. ' ' .. ARGV[6]
local window, place_window = tonumber(ARGV[3]), tonumber(ARGV[8])
for i = 1, 3 do
  local found = redis.call('type', KEYS[i]).ok
  if found ~= 'none' and found ~= (i == 1 and 'hash' or 'zset') then
    return redis.error_reply('WRONGTYPE KEYS[' .. i .. '] ' .. KEYS[i] .. ' holds the wrong kind of value')
  end
end
local floor
local fencing = KEYS[4] and fencing_functions()
if fencing then
  local failed
  floor, failed = fencing.floor(KEYS[4], 4)
  if not floor then
    return failed
  end
end
local now_ms, now_us = fair.now()
fair.drop_dead_waiters(now_ms)
local function hold_afresh()
  redis.call('hdel', key, 'claim')
  redis.call('hset', key, owner, 1)
  if ARGV[7] and ARGV[7] ~= '' then
    redis.call('hset', key, 'data:' .. owner, ARGV[7])
  end
  redis.call('pexpire', key, ARGV[2])
  fair.unqueue(waiter)
  fair.tell_next(ARGV[5], owner, tonumber(ARGV[2]), now_ms, place_window)
  return { 1, floor and fencing.draw(key, KEYS[4], floor) or 0 }
end
local pttl = redis.call('pttl', key)
if pttl ~= -2 and redis.call('hexists', key, owner) == 1 then
  if redis.call('hget', key, 'claim') == waiter then
    -- Handed to this wait: claim it.
    return hold_afresh()
  end
  -- A hold the owner gave up (as lost, its lease about to run out) or one handed to an
  -- earlier wait of it: no guard owns it, so the lock is free, and those queued first
  -- come first, as after a release.
  redis.call('del', key)
  pttl = -2
end
if pttl == -2 then
  local head = redis.call('zrange', queue, 0, 0)[1]
  if not head or head == waiter then
    return hold_afresh()
  end
  -- Someone has waited longer: the lock is theirs to claim.
  fair.hand_to_first(ARGV[5], window, now_ms)
  pttl = window
end
if ARGV[4] == 'wait' then
  local client = fair.client_of(owner)
  local was_alive = redis.call('zscore', alive, client) and 1 or 0
  -- NX keeps the place of the first refused attempt.
  redis.call('zadd', queue, 'NX', now_us, waiter)
  redis.call('zadd', alive, now_ms + place_window, client)
  redis.call('pexpire', queue, place_window * 2)
  redis.call('pexpire', alive, place_window * 2)
  local reply = { 0, pttl, redis.call('zscore', queue, waiter), now_ms, was_alive }
  for i = 9, #ARGV do
    if not redis.call('zscore', queue, ARGV[i]) then
      reply[#reply + 1] = i - 8
    end
  end
  return reply
end
return { 0, pttl }
