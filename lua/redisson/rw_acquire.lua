-- redisson/rw_acquire.lua: take or re-enter a side of a read-write lock in the layout
-- of Redisson's RReadWriteLock (see src/compat.rs), so that Java readers and writers
-- and ours share the lock.
--
-- KEYS[1]  lock key (hash: field `mode` = "read" or "write"; field `<owner>` = that
--          owner's read holds; field `<owner>:write` = the writer's write holds; no
--          other field)
-- ARGV[1]  owner id ("<uuid>:<integer>", as Redisson's `<client id>:<thread id>`)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  "read" or "write"
--
-- Each read hold (each re-entry too) has a key of its own that expires on its own
-- lease, `<timeout prefix>:<n>` for the owner's n-th hold, where the timeout prefix is
-- `{<key>}:<owner>:rwlock_timeout` (`<key>:<owner>:rwlock_timeout` when the key has a
-- brace: Redisson's suffixName); the hash lives as long as its longest hold. Readers
-- share the lock; a writer excludes everyone but itself, and may take the read side of
-- its own lock. There is no writer preference: Redisson has none.
--
-- Granted:  { the owner's count of holds of this side, 0 }
-- Busy:     { 0, remaining PTTL of the lock in ms (-1 if it has none) }
-- Raises WRONGTYPE if KEYS[1] is not a hash.
local redisson = redisson_functions()
local key, owner, lease, side = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local mode = redis.call('hget', key, 'mode')
local pttl = redis.call('pttl', key)
if side == 'write' then
  local field = owner .. ':write'
  if not mode then
    redis.call('hset', key, 'mode', 'write', field, 1)
    redis.call('pexpire', key, lease)
    return { 1, 0 }
  end
  if mode == 'write' and redis.call('hexists', key, field) == 1 then
    local count = redis.call('hincrby', key, field, 1)
    -- A re-entry never shortens the lease.
    redis.call('pexpire', key, math.max(pttl, lease))
    return { count, 0 }
  end
  return { 0, pttl }
end
local timeouts = redisson.beside(key, owner .. ':rwlock_timeout:')
if not mode then
  redis.call('hset', key, 'mode', 'read', owner, 1)
  redis.call('set', timeouts .. '1', 1, 'px', lease)
  redis.call('pexpire', key, lease)
  return { 1, 0 }
end
if mode == 'read' or redis.call('hexists', key, owner .. ':write') == 1 then
  local count = redis.call('hincrby', key, owner, 1)
  redis.call('set', timeouts .. count, 1, 'px', lease)
  redis.call('pexpire', key, math.max(pttl, lease))
  return { count, 0 }
end
return { 0, pttl }
