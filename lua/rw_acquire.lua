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
--
-- A lone holder keeps its deadline as the hash's own expiry: the field `solo` names it,
-- and the leases set is started only when a second holder comes (the lone holder's
-- deadline, read from the hash's PTTL, goes in first). So an uncontended hold costs the
-- mutex's calls: EXISTS (the hash is not there), HSET, PEXPIRE (3), and is taken
-- before the leases' functions are made (see leases.lua).
-- Every redis.call costs the server a microsecond or two: with others holding, a fresh
-- hold takes about 9 (EXISTS, HMGET of every field that decides the call, ZRANGE of
-- the earliest deadline, TIME, HSET, ZADD, ZRANGE of the latest, PEXPIREAT of both
-- keys; 3 more for the second holder, which starts the set); a refusal 5 (EXISTS,
-- HMGET, TIME, PTTL, plus one HSET when it changes a mark, one
-- HEXISTS when a writer is named, and a ZRANGE when the set is in use). Expired holders
-- are dropped only when the earliest deadline has passed (see leases.lua). The `mode`
-- field is there whenever someone holds (every fresh hold writes it, and only deleting
-- the hash removes it), so a lock without it is free.
local key, set, owner, mode = KEYS[1], KEYS[2], ARGV[1], ARGV[3]
local lease = tonumber(ARGV[2])
local field = mode == 'write' and owner .. ':w' or owner
-- Everything that decides the call, in one read (a WRONGTYPE here names KEYS[1] and
-- leaves nothing written); none of it is there when the hash is not (a writer's mark
-- is kept in the hash), and the cheaper EXISTS tells that.
local fields = {}
if redis.call('exists', key) == 1 then
  fields = redis.call('hmget', key, field, 'writer', 'writer_waits', owner, 'waiting', 'mode', 'solo')
end
local floor
local fencing = KEYS[3] and fencing_functions()
if fencing then
  -- Read before the first write, so that a token key of another type leaves nothing
  -- written.
  local failed
  floor, failed = fencing.floor(KEYS[3], 3)
  if not floor then
    return failed
  end
end
-- A free lock taken by a writer, or by a reader with no writer's mark: a lone hold,
-- taken before the leases' functions are made (it needs none of them).
if not fields[6] and (mode == 'write' or not fields[3]) then
  if fields[3] then
    -- Other writers still waiting mark their wait again when they next ask.
    redis.call('hdel', key, 'writer_waits')
  end
  local args = { 'hset', key, field, 1, 'mode', mode, 'solo', field }
  if mode == 'write' then
    args[#args + 1] = 'writer'
    args[#args + 1] = owner
  end
  if ARGV[6] and ARGV[6] ~= '' then
    args[#args + 1] = 'data:' .. field
    args[#args + 1] = ARGV[6]
  end
  redis.call(unpack(args))
  redis.call('pexpire', key, ARGV[2])
  if floor then
    return { 1, fencing.draw(key, KEYS[3], floor) }
  end
  return { 1, 0 }
end
local leases = leases_functions()
local waits, patience = ARGV[4] == 'wait', tonumber(ARGV[5])
local solo = fields[7]
-- The earliest deadline in the set, false if none (a lone holder's is not there).
local earliest, wrong = false, nil
if fields[6] and not solo then
  earliest, wrong = leases.earliest(set, 2)
  if earliest == nil then
    return wrong
  end
end
local now = leases.now()
if earliest and earliest <= now then
  -- The purge drops holders' fields only: of those read, the caller's two.
  for _, gone in ipairs(leases.drop_expired(key, set, now)) do
    if gone == field then
      fields[1] = false
    end
    if gone == owner then
      fields[4] = false
    end
  end
  earliest = leases.earliest(set, 2)
end
local writer = fields[2]
if writer and redis.call('hexists', key, writer .. ':w') == 0 then
  -- The writer's hold expired (dropped above, or by another script's purge).
  redis.call('hdel', key, 'writer', 'token')
  writer = false
end
if fields[1] then
  -- A re-entry. A nested hold never shortens the deadline an earlier one set.
  local count = redis.call('hincrby', key, field, 1)
  if solo == field then
    if lease > redis.call('pttl', key) then
      redis.call('pexpire', key, lease)
    end
    return { count, 0 }
  end
  local deadline = now + lease
  if deadline > tonumber(redis.call('zscore', set, field) or 0) then
    leases.hold_until(key, set, field, deadline, false)
  end
  return { count, 0 }
end
-- A fresh hold of this side: its count, data and the fields `also` names, in one HSET.
local function take(also)
  local deadline = now + lease
  if solo then
    -- A second holder: the lone holder's deadline starts the set (its first write
    -- checks the set's type).
    -- Exactly the hash's expiry (Redis 7); from its PTTL, to a millisecond, before.
    local solo_deadline = redis.pcall('pexpiretime', key)
    if type(solo_deadline) ~= 'number' then
      solo_deadline = now + math.max(redis.call('pttl', key), 1)
    end
    local failed = leases.first_add(set, 2, solo_deadline, solo)
    if failed then
      return failed
    end
    redis.call('pexpireat', set, solo_deadline)
    redis.call('hdel', key, 'solo')
    earliest = solo_deadline
  elseif not fields[6] then
    local failed = leases.first_add(set, 2, deadline, field)
    if failed then
      return failed
    end
  end
  local args = { 'hset', key, field, 1 }
  for _, value in ipairs(also) do
    args[#args + 1] = value
  end
  if ARGV[6] and ARGV[6] ~= '' then
    args[#args + 1] = 'data:' .. field
    args[#args + 1] = ARGV[6]
  end
  redis.call(unpack(args))
  leases.hold_until(key, set, field, deadline, earliest == false, not fields[6] and not solo)
  return { 1, 0 }
end
local function refuse(retry, marks)
  if waits and not fields[5] then
    marks[#marks + 1] = 'waiting'
    marks[#marks + 1] = 1
  end
  if #marks > 0 then
    redis.call('hset', key, unpack(marks))
  end
  local pttl = redis.call('pttl', key)
  if pttl < 0 or (retry and retry < pttl) then
    pttl = retry or lease
  end
  return { 0, math.max(pttl, 1) }
end
local writer_waits = tonumber(fields[3] or 0)
if mode == 'read' then
  if writer == owner then
    -- Reading inside one's own write hold.
    return take({})
  end
  if writer or writer_waits > now then
    return refuse(writer_waits > now and writer_waits - now or nil, {})
  end
  return take({ 'mode', 'read' })
end
if fields[4] then
  return redis.error_reply('WOULDDEADLOCK')
end
if not earliest and not solo then
  if fields[3] then
    -- Other writers still waiting mark their wait again when they next ask.
    redis.call('hdel', key, 'writer_waits')
  end
  local granted = take({ 'mode', 'write', 'writer', owner })
  if floor and granted[1] then
    granted[2] = fencing.draw(key, KEYS[3], floor)
  end
  return granted
end
-- Ask again well within the patience, so that readers stay out while this waits.
return refuse(math.floor(patience / 3), waits and { 'writer_waits', now + patience } or {})
