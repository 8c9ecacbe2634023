-- inspect.lua: read a lock's state in one step.
--
-- KEYS[1]  lock key
--
-- Returns { PTTL of the lock key (-2 if there is no lock),
--           the hold's fencing token as a decimal string, or "0" if it has none,
--           { owner, count, owner, count, ... },
--           1 if someone was refused the lock while this hold had it (the `waiting`
--           field), else 0 }.
-- The `token` and `waiting` fields (see acquire.lua) are not owners.
-- Raises WRONGTYPE if KEYS[1] exists but is not a hash.
local fields = redis.call('hgetall', KEYS[1])
local token, owners, waiting = '0', {}, 0
for i = 1, #fields, 2 do
  if fields[i] == 'token' then
    token = fields[i + 1]
  elseif fields[i] == 'waiting' then
    waiting = 1
  else
    owners[#owners + 1] = fields[i]
    owners[#owners + 1] = fields[i + 1]
  end
end
return { redis.call('pttl', KEYS[1]), token, owners, waiting }
