-- redisson/fair_force.lua: break a fair lock in the layout of Redisson's RFairLock
-- (see redisson/fair_acquire.lua) whoever holds it, as its forceUnlockAsync does, and
-- as force_unlock.lua breaks holdlock's: the holders' clients are told, the queue
-- keeps its order and its head is told.
--
-- KEYS[1]  lock key, KEYS[2] the queue, KEYS[3] the waiters' deadlines
-- ARGV     as force_unlock.lua's: ARGV[1] "spublish" for a shard channel; ARGV[4] the
--          start of a client's own channel and ARGV[5] the message to tell each client
--          whose holds this breaks (the others are not used)
--
-- Returns 1 if the lock was held, 0 if not.
-- Raises WRONGTYPE (naming the key) if a key holds another type.
local redisson = redisson_functions()
local wrong = redisson.wrong_type({ 'hash', 'list', 'zset' })
if wrong then
  return wrong
end
local key = KEYS[1]
redisson.drop_stale_heads(KEYS[2], KEYS[3], redisson.now())
local fields = redis.call('hkeys', key)
if #fields == 0 then
  return 0
end
local told = {}
for _, field in ipairs(fields) do
  local client = string.match(field, '^(%x+%-%x+%-%x+%-%x+%-%x+):')
  if client and not told[client] then
    told[client] = true
    redis.call('publish', ARGV[4] .. client, ARGV[5])
  end
end
redis.call('del', key)
redisson.tell_head(KEYS[2], redisson.channel('redisson_lock__channel', key), ARGV[1])
return 1
