-- acquire.lua: take a reentrant hash lock afresh.
--
-- KEYS[1]  lock key (hash: field = owner id, value = hold count; a fenced hold also
--          has the field `token` = its fencing token, and a lock someone was refused
--          has the field `waiting` = the client to hand it to next; no owner id can be
--          either, as owner ids are "<client-uuid>:<task>")
-- KEYS[2]  token floor key (same hash slot), given only to draw a fencing token: the
--          last token issued, kept only until this server's clock has passed it
-- ARGV[1]  owner id "<client-uuid>:<task>"
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  "try" for a single try that will not wait: a refusal then leaves the
--          `waiting` mark alone (nobody waits for the release it would publish)
-- ARGV[4]  data to keep with a fresh hold (field `data:<owner>`, shown by inspect),
--          or empty for none; it goes with the hold (the key is deleted with the
--          last release)
--
-- A hold the caller already has is raised by `reenter.lua` instead.
--
-- Tokens are drawn as fencing.lua says.
--
-- Every redis.call costs about a microsecond of the server's time: a free lock takes
-- 3 (PTTL, HSET, PEXPIRE), a busy one 2 (PTTL, HGETALL of its few fields), plus an
-- HSET when the refusal changes the `waiting` mark.
--
-- The mark names the client (the owner id up to its first ':') that the release
-- hands the lock to (release.lua publishes it; waiters of other clients give that
-- client's waiter a head start, see src/waiting.rs). The first client refused while
-- the hold lasts is named, except that any other client replaces the holder's own:
-- the holder's client lines its waiters up locally, and its next one asks the moment
-- the hold is granted, before another client's waiter can, so naming the first
-- refused alone would hand a busy lock around one client for as long as it has
-- waiters.
--
-- Both keys are checked before the first write, so that a failure leaves nothing
-- written: KEYS[1] by PTTL and HGETALL (or it does not exist), KEYS[2] by reading the
-- floor (only a fenced acquisition pays for it; it reads the floor anyway).
--
-- Granted:  { 1, fencing token or 0 }
-- Busy:     { 0, remaining PTTL of the current holder in ms (-1 if it has none) }
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash, and the error
-- "WRONGTYPE KEYS[2] <key> ..." (naming the key) if KEYS[2] exists but is not a string.
local key, owner, lease, fenced = KEYS[1], ARGV[1], ARGV[2], KEYS[2] ~= nil
if fenced and redis.replicate_commands then
  -- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless the
  -- script replicates its effects instead; from 7.0 this is a no-op.
  redis.replicate_commands()
end
-- The client part of an owner id.
local function client_of(id)
  return string.match(id, '^[^:]*')
end
-- PTTL answers "free?" (-2) and, when busy, how long the holder has left.
local pttl = redis.call('pttl', key)
if pttl ~= -2 then
  local fields = redis.call('hgetall', key)
  local mine, holder, named = false, nil, nil
  for i = 1, #fields, 2 do
    local field = fields[i]
    if field == owner then
      mine = true
    elseif field == 'waiting' then
      named = fields[i + 1]
    elseif field ~= 'token' and string.sub(field, 1, 5) ~= 'data:' then
      holder = field
    end
  end
  if not mine then
    -- The caller may wait for the release: have it told (see release.lua), and have
    -- the lock handed to the right client (see above).
    local client = client_of(owner)
    local waits = ARGV[3] ~= 'try'
    if waits and named ~= client and (not named or (holder and named == client_of(holder))) then
      redis.call('hset', key, 'waiting', client)
    end
    return { 0, pttl }
  end
end
local floor = 0
if fenced then
  -- Read before the first write: a token key of another type fails the call with
  -- nothing written (not with the hold written and no token drawn).
  local failed
  floor, failed = fencing.floor(KEYS[2], 2)
  if not floor then
    return failed
  end
end
-- A field of ours still here is a hold the caller already gave up as lost (its lease
-- was about to run out, so its guards did not release it): start over.
redis.call('hset', key, owner, 1)
if ARGV[4] and ARGV[4] ~= '' then
  redis.call('hset', key, 'data:' .. owner, ARGV[4])
end
redis.call('pexpire', key, lease)
if not fenced then
  return { 1, 0 }
end
return { 1, fencing.draw(key, KEYS[2], floor) }
