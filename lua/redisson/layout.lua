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
