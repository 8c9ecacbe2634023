-- redisson/sem_inspect.lua: read a semaphore in the layout of Redisson's
-- RPermitExpirableSemaphore (see redisson/sem_acquire.lua) in one step, changing
-- nothing, in the shape inspect.lua answers.
--
-- KEYS[1]  the semaphore (permits free)
-- KEYS[2]  its permits' deadlines
--
-- Returns { PTTL of KEYS[1] (-2 if it does not exist),
--           { permit id, 1, ..., "permits", free + held }
--           this server's clock in milliseconds,
--           { { permit id, deadline in ms, ... } } }.
-- A permit id that is not printable text (Redisson's are 16 random bytes) is given as
-- Redisson prints it: in hexadecimal. Permits past their deadline are returned as
-- they are (the next acquire gives them back): the reader compares with the clock.
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local redisson = redisson_functions()
local wrong = redisson.wrong_type({ 'string', 'zset' })
if wrong then
  return wrong
end
local now = redisson.now()
local stored = redis.call('get', KEYS[1])
local free = stored and tonumber(stored)
local members = redis.call('zrange', KEYS[2], 0, -1, 'WITHSCORES')
local fields, deadlines = {}, {}
for i = 1, #members, 2 do
  local id = members[i]
  if string.find(id, '[^%w%p]') then
    id = string.gsub(id, '.', function(byte)
      return string.format('%02x', string.byte(byte))
    end)
  end
  fields[#fields + 1] = id
  fields[#fields + 1] = '1'
  deadlines[#deadlines + 1] = id
  deadlines[#deadlines + 1] = members[i + 1]
end
if free then
  fields[#fields + 1] = 'permits'
  fields[#fields + 1] = tostring(free + #members / 2)
end
return { redis.call('pttl', KEYS[1]), fields, now, { deadlines } }
