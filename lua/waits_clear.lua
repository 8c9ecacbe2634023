-- waits_clear.lua: take down a wait-for edge (see src/waiting/deadlock.rs) once its
-- wait has ended, unless the key records another wait by now (the same owner's next
-- wait may have written it before this ran).
--
-- KEYS[1]  the owner's edge, `<prefix>waits:<owner>`
-- ARGV[1]  the ended wait's record
--
-- Returns 1 if it was taken down, 0 if it was gone or another wait's.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
