-- rw_acquire.lua: take (or re-enter) the read or the write lock of a reentrant
-- read-write lock (after leases.lua).
--
-- KEYS[1]  lock key (hash: field `mode` = "read" or "write"; field `<owner>` = that
--          owner's read holds, `<owner>:w` = the writer's write holds; field `writer`
--          = the writer's owner id; field `waiting` = "1" once someone was refused;
--          field `writer_waits` = until when (ms) a refused writer keeps new readers
--          out)
-- KEYS[2]  its leases (see leases.lua): one deadline per holder field
-- KEYS[3]  token floor key (same hash slot), given only for a write lock that draws a
--          fencing token (see fencing.lua); the token is kept in the field `token`
--          while the write hold lasts
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  "read" or "write"
-- ARGV[4]  "wait" if the caller waits when refused; anything else for a single try
-- ARGV[5]  how long (ms) a waiting writer keeps new readers out without asking again
-- ARGV[6]  data to keep with a fresh hold of this side (field `data:<holder field>`,
--          dropped with the holder), or empty for none
--
-- Many owners may hold the read lock together; the write lock excludes everyone else,
-- except that the writer may also take the read lock of its own name. Both are
-- reentrant per owner. Writers are not starved: once a writer waits, new readers are
-- refused (readers already in keep their holds and may re-enter) until no writer has
-- asked for ARGV[5] ms; waiting writers ask again well within that.
--
-- Granted:      { the owner's count of holds of this side (1 or more), the fencing
--               token of a fresh fenced write hold, else 0 }
-- Busy:         { 0, ms after which to ask again }
-- Raises "WOULDDEADLOCK" when an owner holding only the read lock asks for the write
-- lock; WRONGTYPE (naming the key) if a key holds another type.
local key, set, owner, mode = KEYS[1], KEYS[2], ARGV[1], ARGV[3]
local lease, waits, patience = tonumber(ARGV[2]), ARGV[4] == 'wait', tonumber(ARGV[5])
local wrong = leases.wrong_type({ KEYS[1], KEYS[2] })
if wrong then
  return wrong
end
local floor
if KEYS[3] then
  -- Read before the first write, so that a token key of another type leaves nothing
  -- written.
  local failed
  floor, failed = fencing.floor(KEYS[3], 3)
  if not floor then
    return failed
  end
end
local now = leases.now()
leases.drop_expired(key, set, now)
local field = mode == 'write' and owner .. ':w' or owner
local function hold()
  local count = redis.call('hincrby', key, field, 1)
  if count == 1 and ARGV[6] and ARGV[6] ~= '' then
    redis.call('hset', key, 'data:' .. field, ARGV[6])
  end
  -- A nested hold never shortens the deadline an earlier one set.
  local deadline = math.max(now + lease, tonumber(redis.call('zscore', set, field) or 0))
  leases.hold_until(key, set, field, deadline)
  return { count, 0 }
end
local function refuse(retry)
  if waits then
    redis.call('hset', key, 'waiting', 1)
  end
  local pttl = redis.call('pttl', key)
  if pttl < 0 or (retry and retry < pttl) then
    pttl = retry or lease
  end
  return { 0, math.max(pttl, 1) }
end
if redis.call('hexists', key, field) == 1 then
  return hold()
end
local writer = redis.call('hget', key, 'writer')
if writer and redis.call('hexists', key, writer .. ':w') == 0 then
  -- The writer's hold expired.
  redis.call('hdel', key, 'writer')
  writer = nil
end
local held = redis.call('zcard', set) > 0
if mode == 'read' then
  if writer == owner then
    return hold()
  end
  local writer_waits = tonumber(redis.call('hget', key, 'writer_waits') or 0)
  if writer or writer_waits > now then
    return refuse(writer_waits > now and writer_waits - now or nil)
  end
  redis.call('hset', key, 'mode', 'read')
  return hold()
end
if redis.call('hexists', key, owner) == 1 then
  return redis.error_reply('WOULDDEADLOCK')
end
if not held then
  -- Other writers still waiting mark their wait again when they next ask.
  redis.call('hdel', key, 'writer_waits')
  redis.call('hset', key, 'mode', 'write', 'writer', owner)
  local granted = hold()
  if floor then
    granted[2] = fencing.draw(key, KEYS[3], floor)
  end
  return granted
end
if waits then
  redis.call('hset', key, 'writer_waits', now + patience)
end
-- Ask again well within the patience, so that readers stay out while this waits.
return refuse(math.floor(patience / 3))
