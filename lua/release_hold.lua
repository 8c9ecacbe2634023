-- release_hold.lua: dropping one hold of a reentrant hash lock, put in front of
-- release.lua and release_many.lua (one copy of the rule for both).
--
-- The lease is left as it is: the acquisition or the watchdog's last renewal set it,
-- and that is what the holder counts on.
--
-- The channel is told only if someone was refused the lock while this hold had it,
-- or the holder's client has more waiters (acquire.lua sets the field `waiting`): a
-- lock nobody waited for is released with two calls (HMGET, DEL) and sends nothing to
-- subscribers or, on a cluster, replicas, and does not read the queue.
--
-- The message names the client the lock is handed to: the first of the queue, taken
-- off it (its head waiter asks at once; if more of its waiters remain, its grant
-- queues it again at the back). The next clients of the queue follow as backups, in
-- order, comma-separated ("<first>,<second>,<third>"): each asks after a delay that
-- grows with its rank, in case the first is gone (src/waiting.rs). An empty message
-- (the queue expired) names nobody: every waiting client asks.
local release = {}

-- Drops one hold of `owner` on the lock `key` whose queue of waiting clients is
-- `clients` (nil: the key followed by ":clients", src/keys.rs's name), telling the release channel with `publish` (PUBLISH or SPUBLISH);
-- `last_likely` tries the last release's path (reads before a write) first. Returns
-- the owner's remaining hold count (0: the key was deleted and any waiters told), or
-- -1 if the owner holds nothing. The first call on `key` raises WRONGTYPE before any
-- write if it is not a hash.
function release.hold(key, clients, owner, publish, last_likely)
  local count, waiting
  if last_likely then
    local fields = redis.call('hmget', key, owner, 'waiting')
    if not fields[1] then
      return -1
    end
    count, waiting = tonumber(fields[1]) - 1, fields[2]
    if count > 0 then
      return redis.call('hincrby', key, owner, -1)
    end
  else
    count = redis.call('hincrby', key, owner, -1)
    if count < 0 then
      -- The owner held nothing, and HINCRBY created its field: take it back (an
      -- emptied hash is deleted with it).
      redis.call('hdel', key, owner)
      return -1
    end
    if count > 0 then
      return count
    end
    waiting = redis.call('hget', key, 'waiting')
  end
  -- Only one owner can hold a lock, so its last hold frees the whole key (and the
  -- `token` and `waiting` fields with it).
  redis.call('del', key)
  if waiting then
    clients = clients or key .. ':clients'
    local named = redis.call('zrange', clients, 0, 2)
    if named[1] then
      redis.call('zrem', clients, named[1])
    end
    redis.call(publish, key .. ':released', table.concat(named, ','))
  end
  return 0
end
