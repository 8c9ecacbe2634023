-- fencing.lua: fencing tokens, put in front of acquire.lua, fair_acquire.lua and
-- rw_acquire.lua (one copy of the token rule for all).
--
-- A token is a hybrid logical clock reading: max(floor + 1, server TIME in
-- microseconds). It exceeds every token issued before on this server even if the
-- clock stepped back (the floor outlives the step: Redis expires it by the same
-- clock), and every token lost with a restart or failover as long as the clock did
-- not step back by more than the outage lasted. Tokens stay below 2^53 (until the
-- year 2255), so they are exact in Lua numbers and are always formatted as integers.
--
-- The functions are made only by a call that draws a token (`local fencing =
-- fenced and fencing_functions()`): making them costs the server about as much as a
-- Redis call does, and most acquisitions draw none.
local function fencing_functions()
  local fencing = {}

  -- The last token issued from `floor_key` (KEYS[index]), read before the script's
  -- first write; or nil and an error reply to return, naming the key, if it holds
  -- another type (so that the failure leaves nothing written).
  function fencing.floor(floor_key, index)
    local last = redis.pcall('get', floor_key)
    if type(last) == 'table' and last.err then
      if string.sub(last.err, 1, 9) == 'WRONGTYPE' then
        return nil, redis.error_reply('WRONGTYPE KEYS[' .. index .. '] ' .. floor_key .. ' holds the wrong kind of value')
      end
      return nil, last
    end
    return tonumber(last or '0') or 0
  end

  -- Draws the next token above `floor`: kept in the lock's `token` field and as the new
  -- floor, which expires only once the clock reads past it (from then on TIME alone
  -- beats it). Returns the token.
  function fencing.draw(lock_key, floor_key, floor)
    local now = redis.call('time')
    local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
    if token <= floor then
      token = floor + 1
    end
    local text = string.format('%d', token)
    redis.call('hset', lock_key, 'token', text)
    redis.call('set', floor_key, text)
    redis.call('pexpireat', floor_key, string.format('%d', math.floor(token / 1000) + 1))
    return token
  end
  return fencing
end
