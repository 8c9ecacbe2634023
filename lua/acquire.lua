-- acquire.lua: take a reentrant hash lock afresh.
--
-- KEYS[1]  lock key (hash: field = owner id, value = hold count; a fenced hold also
--          has the field `token` = its fencing token, and a lock someone was refused
--          has the field `waiting` = "1": its release is announced; no owner id can be
--          either, as owner ids are "<client-uuid>:<task>")
-- KEYS[2]  the queue of clients waiting for the lock (same hash slot): a sorted set
--          of client ids (the owner id up to its first ':'), scored by place
-- KEYS[3]  token floor key (same hash slot), given only to draw a fencing token: the
--          last token issued, kept only until this server's clock has passed it
-- ARGV[1]  owner id "<client-uuid>:<task>"
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  "try" for a single try that will not wait: a refusal then neither marks
--          the lock nor queues the client (nobody waits for the release it would
--          publish); anything else (or nothing) for a call that waits
-- ARGV[4]  data to keep with a fresh hold (field `data:<owner>`, shown by inspect),
--          or empty for none; it goes with the hold (the key is deleted with the
--          last release)
-- ARGV[5]  hand-off hints (optional, mutex waits only, given with every attempt
--          after a waiter's first): "q" if the caller's client has more waiters for
--          this lock, so a grant queues the client again at the back (moving it there
--          if it was still queued) and marks the lock; "d" if it has none, so a grant
--          takes the client off the queue (it may have been granted without being
--          named: by a backup's or a fallback's attempt); "f" if the release just
--          named the caller's client, so a refusal (another caller took the lock
--          first) queues it at the front rather than the back
--
-- A hold the caller already has is raised by `reenter.lua` instead.
--
-- Tokens are drawn as fencing.lua says.
--
-- Every redis.call costs the server one to two microseconds, and so does making a
-- function or a table: a free lock that nobody queues for, taken with no token, data
-- or hints (the usual acquisition), costs 3 calls (EXISTS of both keys, HSET,
-- PEXPIRE) and makes nothing; any other free lock 4 (PTTL, HSET, PEXPIRE, and EXISTS
-- of the queue), a busy one 3 (the fast path's EXISTS when it was tried, PTTL,
-- HGETALL of its few fields), plus the queue's 3 (ZRANGE, ZADD, PEXPIRE) and an HSET
-- of the mark when it is not set yet.
--
-- Waiting clients, not waiters, are queued (see src/waiting.rs): a client's waiters
-- line up locally and only the head asks, so a client is queued once however many
-- of its tasks wait. release.lua names the first client of the queue (and the next
-- few as backups); only that client's head asks at once. ZADD NX keeps a client
-- already queued where it is.
--
-- Every key is read before the first write, so that a failure leaves nothing
-- written: KEYS[1] by PTTL and HGETALL (or it does not exist), KEYS[2] by ZRANGE
-- (only when the client is to be queued), KEYS[3] by reading the floor (only a
-- fenced acquisition pays for it; it reads the floor anyway).
--
-- Granted:  { 1, fencing token or 0 }
-- Busy:     { 0, remaining PTTL of the current holder in ms (-1 if it has none) }
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash or KEYS[2] is not a sorted
-- set, and the error "WRONGTYPE KEYS[3] <key> ..." (naming the key) if KEYS[3] exists
-- but is not a string.

-- The usual acquisition first, before anything is made: the lock and its queue but
-- no token key, no data and no hints (ARGV holds at most the owner, the lease and
-- "try"), a lock that is free and nobody queues for. What follows would do the same
-- with more.
if #KEYS == 2 and not ARGV[4] and redis.call('exists', KEYS[1], KEYS[2]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return { 1, 0 }
end
local key, clients, owner, lease, fenced = KEYS[1], KEYS[2], ARGV[1], ARGV[2], KEYS[3] ~= nil
local hints = ARGV[5] or ''
if fenced and redis.replicate_commands then
  -- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless the
  -- script replicates its effects instead; from 7.0 this is a no-op.
  redis.replicate_commands()
end
-- The client part of an owner id.
local client = string.match(owner, '^[^:]*')
-- The place the caller's client takes in the queue: behind the last (or before the
-- first) client queued. Read before any write.
local function place_in_queue(front)
  local edge = front and 0 or -1
  local ends = redis.call('zrange', clients, edge, edge, 'withscores')
  if not ends[2] then
    return 0
  end
  return tonumber(ends[2]) + (front and -1 or 1)
end
-- Queues the caller's client at `place` unless it is queued already; the queue lasts
-- while the current hold may, and a lease more.
local function queue(place, holder_pttl)
  redis.call('zadd', clients, 'NX', place, client)
  redis.call('pexpire', clients, holder_pttl + 2 * tonumber(lease))
end
-- PTTL answers "free?" (-2) and, when busy, how long the holder has left.
local pttl = redis.call('pttl', key)
if pttl ~= -2 then
  local fields = redis.call('hgetall', key)
  local mine, marked = false, false
  for i = 1, #fields, 2 do
    local field = fields[i]
    if field == owner then
      mine = true
    elseif field == 'waiting' then
      marked = true
    end
  end
  if not mine then
    if ARGV[3] ~= 'try' then
      -- The caller waits for the release: have it told (see release.lua), and its
      -- client queued for the hand-off.
      local place = place_in_queue(string.find(hints, 'f', 1, true) ~= nil)
      if not marked then
        redis.call('hset', key, 'waiting', '1')
      end
      queue(place, math.max(pttl, 0))
    end
    return { 0, pttl }
  end
end
local floor = 0
local fencing = fenced and fencing_functions()
if fencing then
  -- Read before the first write: a token key of another type fails the call with
  -- nothing written (not with the hold written and no token drawn).
  local failed
  floor, failed = fencing.floor(KEYS[3], 3)
  if not floor then
    return failed
  end
end
-- Queued again at once if more of the client's waiters want the lock: its next head
-- then waits for its name without asking first (see src/waiting.rs). Else a waiter's
-- grant takes the client off the queue: nobody of it waits any more.
local requeue = string.find(hints, 'q', 1, true) ~= nil
local dequeue = string.find(hints, 'd', 1, true) ~= nil
local place = requeue and place_in_queue(false)
-- A field of ours still here is a hold the caller already gave up as lost (its lease
-- was about to run out, so its guards did not release it): start over.
redis.call('hset', key, owner, 1)
if ARGV[4] and ARGV[4] ~= '' then
  redis.call('hset', key, 'data:' .. owner, ARGV[4])
end
redis.call('pexpire', key, lease)
if requeue then
  redis.call('hset', key, 'waiting', '1')
  redis.call('zadd', clients, place, client)
  redis.call('pexpire', clients, 3 * tonumber(lease))
else
  if dequeue then
    redis.call('zrem', clients, client)
  end
  -- Clients still queued wait for this hold's release to name the next of them:
  -- mark it, or nobody would tell them (they sleep until named).
  if redis.call('exists', clients) == 1 then
    redis.call('hset', key, 'waiting', '1')
  end
end
if not fenced then
  return { 1, 0 }
end
return { 1, fencing.draw(key, KEYS[3], floor) }
