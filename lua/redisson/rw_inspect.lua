-- redisson/rw_inspect.lua: read a read-write lock in the layout of Redisson's
-- RReadWriteLock (see redisson/rw_acquire.lua) in one step, changing nothing, in the
-- shape inspect.lua answers.
--
-- KEYS[1]  the lock's hash
--
-- Returns { PTTL of KEYS[1] (-2 if it does not exist),
--           its fields and values { field, value, ... },
--           this server's clock in milliseconds,
--           { { holder field, its deadline in ms by this clock, ... } } }:
-- a writer's deadline is the hash's expiry; a reader's, that of the longest-lived of
-- its holds' timeout keys (0 for a reader whose keys have all expired: it died, as far
-- as Redisson can tell). A holder with no expiry is not in the list.
-- Raises WRONGTYPE (naming the key) if KEYS[1] is not a hash.
local redisson = redisson_functions()
local key = KEYS[1]
local wrong = redisson.wrong_type({ 'hash' })
if wrong then
  return wrong
end
local now = redisson.now()
local pttl = redis.call('pttl', key)
local fields = redis.call('hgetall', key)
local deadlines = {}
for i = 1, #fields, 2 do
  local field, held = fields[i], tonumber(fields[i + 1])
  local left
  if held and string.sub(field, -6) == ':write' then
    left = pttl
  elseif held then
    left = -2
    for n = held, 1, -1 do
      left = math.max(left, redis.call('pttl', redisson.beside(key, field .. ':rwlock_timeout:' .. n)))
    end
  end
  if left and left ~= -1 then
    deadlines[#deadlines + 1] = field
    deadlines[#deadlines + 1] = left == -2 and 0 or now + left
  end
end
return { pttl, fields, now, { deadlines } }
