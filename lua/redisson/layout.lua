-- redisson/layout.lua: what the scripts of Redisson's layouts share (see src/compat.rs),
-- put in front of them.
if redis.replicate_commands then
  -- Redis < 5 must replicate these scripts' effects, as some read TIME.
  redis.replicate_commands()
end
-- The functions, made when a script first needs them (`local redisson =
-- redisson_functions()`): renew_many.lua carries them for the holds of Redisson's
-- layouts alone, and making them costs the server more than a Redis call does.
local function redisson_functions()
  local redisson = {}

  -- A key beside `key`, in its Cluster slot (Redisson's suffixName): `{<key>}:<suffix>`,
  -- or `<key>:<suffix>` when the key has a brace.
  function redisson.beside(key, suffix)
    if string.find(key, '{', 1, true) then
      return key .. ':' .. suffix
    end
    return '{' .. key .. '}:' .. suffix
  end

  -- A channel of `key` (Redisson's prefixName): `<prefix>:{<key>}`, or `<prefix>:<key>`
  -- when the key has a brace.
  function redisson.channel(prefix, key)
    if string.find(key, '{', 1, true) then
      return prefix .. ':' .. key
    end
    return prefix .. ':{' .. key .. '}'
  end

  -- This server's clock in milliseconds.
  function redisson.now()
    local time = redis.call('time')
    return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end

  -- Moves every waiter's deadline by `by` milliseconds (a wait earlier at a grant, a
  -- wait later when a waiter takes the head back): Redisson's arithmetic, where a
  -- deadline is the one ahead plus a wait.
  function redisson.move_deadlines(deadlines, by)
    for _, waiter in ipairs(redis.call('zrange', deadlines, 0, -1)) do
      redis.call('zincrby', deadlines, by, waiter)
    end
  end

  -- Drops the heads of a fair lock's queue whose deadline is at or before `now`
  -- (RFairLock's rule: a waiter that stopped asking loses its place), leaving every
  -- other deadline as it is.
  function redisson.drop_stale_heads(queue, deadlines, now)
    while true do
      local head = redis.call('lindex', queue, 0)
      if not head then
        return
      end
      local deadline = redis.call('zscore', deadlines, head)
      if not deadline or tonumber(deadline) > now then
        return
      end
      redis.call('zrem', deadlines, head)
      redis.call('lpop', queue)
    end
  end

  -- Tells the head of a fair lock's queue that the lock is free, on its own channel
  -- `<channel>:<owner>` (RFairLock's), with Redisson's unlock message.
  function redisson.tell_head(queue, channel, publish)
    local head = redis.call('lindex', queue, 0)
    if head then
      redis.call(publish == 'spublish' and 'spublish' or 'publish', channel .. ':' .. head, '0')
    end
  end

  -- A WRONGTYPE error naming the first of KEYS that holds a type other than `types`
  -- says (by position; 'none' is always fine), or nil.
  function redisson.wrong_type(types)
    for i, expected in ipairs(types) do
      local found = redis.call('type', KEYS[i]).ok
      if found ~= 'none' and found ~= expected then
        return redis.error_reply('WRONGTYPE KEYS[' .. i .. '] ' .. KEYS[i] .. ' holds the wrong kind of value')
      end
    end
  end

  return redisson
end
