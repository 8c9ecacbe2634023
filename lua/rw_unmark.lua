-- rw_unmark.lua: take down the marks of a client whose waits for the write lock of a
-- read-write lock all ended without it (cancelled, gave up, shut down).
--
-- KEYS[1]  lock key (see rw_acquire.lua)
--
-- With nobody holding (no `mode` field), the hash is only marks (`writer_waits`, and
-- `waiting`, whose release was told already): it is deleted. With holders, only the
-- writer's mark goes (`waiting` stays: their release must still be told); writers of
-- other clients still waiting put it back when they next ask.
--
-- Returns 1 if the hash was deleted, else 0.
if redis.call('hexists', KEYS[1], 'mode') == 0 then
  return redis.call('del', KEYS[1])
end
redis.call('hdel', KEYS[1], 'writer_waits')
return 0
