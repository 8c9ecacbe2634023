-- leases.lua: holders that expire one by one, put in front of the scripts of the kinds
-- that have several holders at once (sem_*.lua, rw_*.lua, lease_renew.lua).
--
-- Redis 7.0 has no per-field expiry, so each holder's deadline is kept as data: the
-- lock's hash has one field per holder, and a sorted set beside it (same slot) maps
-- each holder to its deadline in milliseconds by this server's clock. Every script
-- that reads the holders first drops those whose deadline has passed, so a holder
-- that died frees its share within its own lease while the others renew theirs. Both
-- keys expire at the latest deadline, as a safety net.
if redis.replicate_commands then
  -- Redis < 5 must replicate these scripts' effects, as they read TIME.
  redis.replicate_commands()
end
-- The functions, made when a script first needs them (`local leases =
-- leases_functions()`): making them costs the server more than a Redis call does, and
-- a lone holder's take and give back of a read-write lock need none of them.
local function leases_functions()
  local leases = {}

  -- The server's clock in milliseconds.
  function leases.now()
    local time = redis.call('time')
    return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end

  -- Checks that `keys` (a hash, then sorted sets) hold their types or nothing; returns
  -- an error reply naming the first that does not, else nil.
  function leases.wrong_type(keys)
    for i, k in ipairs(keys) do
      local found = redis.call('type', k).ok
      if found ~= 'none' and found ~= (i == 1 and 'hash' or 'zset') then
        return redis.error_reply('WRONGTYPE KEYS[' .. i .. '] ' .. k .. ' holds the wrong kind of value')
      end
    end
    return nil
  end

  -- The earliest deadline in `set` (KEYS[index]), false if it holds none; or nil and an
  -- error reply naming the key if it holds another type. A read, so call it before the
  -- first write. One ZRANGE tells whether anything is due to be dropped, so that a call
  -- that finds nothing expired (the usual case) pays for no purge.
  function leases.earliest(set, index)
    local first = redis.pcall('zrange', set, 0, 0, 'WITHSCORES')
    if first.err then
      if string.sub(first.err, 1, 9) == 'WRONGTYPE' then
        return nil, redis.error_reply('WRONGTYPE KEYS[' .. index .. '] ' .. set .. ' holds the wrong kind of value')
      end
      return nil, first
    end
    return first[2] and tonumber(first[2]) or false
  end

  -- Drops the holders of `hash` whose deadline in `set` has passed by `now`; returns
  -- them (a list, empty if none).
  function leases.drop_expired(hash, set, now)
    local gone = redis.call('zrangebyscore', set, '-inf', now)
    for _, holder in ipairs(gone) do
      redis.call('hdel', hash, holder, 'data:' .. holder)
    end
    if #gone > 0 then
      redis.call('zremrangebyscore', set, '-inf', now)
    end
    return gone
  end

  -- Adds `holder` with `deadline` to `set` (KEYS[index]) as a script's first write, for
  -- a set whose type was not checked before: nil, or an error reply naming the key if
  -- it holds another type (nothing was written then).
  function leases.first_add(set, index, deadline, holder)
    local added = redis.pcall('zadd', set, deadline, holder)
    if type(added) == 'table' and added.err then
      if string.sub(added.err, 1, 9) == 'WRONGTYPE' then
        return redis.error_reply('WRONGTYPE KEYS[' .. index .. '] ' .. set .. ' holds the wrong kind of value')
      end
      return added
    end
    return nil
  end

  -- Sets `holder`'s deadline, and has both keys live until the latest deadline. `alone`
  -- says that the set held nobody else: the deadline is then the latest without asking.
  -- The keys already live until the latest deadline (every call that set one saw to
  -- that), so they are written only when this one is the latest. `added`: the deadline
  -- is in the set already (see leases.first_add).
  function leases.hold_until(hash, set, holder, deadline, alone, added)
    if not added then
      redis.call('zadd', set, deadline, holder)
    end
    if not alone and tonumber(redis.call('zrange', set, -1, -1, 'WITHSCORES')[2]) > deadline then
      return
    end
    redis.call('pexpireat', hash, deadline)
    redis.call('pexpireat', set, deadline)
  end
  return leases
end
