-- redisson/sem_force.lua: break a semaphore in the layout of Redisson's
-- RPermitExpirableSemaphore (see redisson/sem_acquire.lua): every permit comes back,
-- whoever holds it, and the waiters are told, as force_unlock.lua breaks holdlock's.
--
-- KEYS[1]  the semaphore (permits free)
-- KEYS[2]  its permits' deadlines
-- ARGV     as force_unlock.lua's: ARGV[1] "spublish" for a shard channel; ARGV[4] the
--          start of a client's own channel and ARGV[5] the message to tell each client
--          whose permits this breaks (the others are not used)
--
-- The semaphore's channel is "redisson_sc:{<key>}" (`redisson_sc:<key>` when the key
-- has a brace: Redisson's prefixName), in the key's slot.
--
-- Returns 1 if a permit was held (its deadline ahead), 0 if none was.
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local redisson = redisson_functions()
local wrong = redisson.wrong_type({ 'string', 'zset' })
if wrong then
  return wrong
end
local now = redisson.now()
local members = redis.call('zrange', KEYS[2], 0, -1, 'WITHSCORES')
if #members == 0 then
  return 0
end
local held, told = 0, {}
for i = 1, #members, 2 do
  if tonumber(members[i + 1]) > now then
    held = held + 1
  end
  local client = string.match(members[i], '^(%x+%-%x+%-%x+%-%x+%-%x+):')
  if client and not told[client] then
    told[client] = true
    redis.call('publish', ARGV[4] .. client, ARGV[5])
  end
end
redis.call('del', KEYS[2])
local free = redis.call('incrby', KEYS[1], #members / 2)
local channel = redisson.channel('redisson_sc', KEYS[1])
redis.call(ARGV[1] == 'spublish' and 'spublish' or 'publish', channel, free)
return held > 0 and 1 or 0
