-- shard_channels.lua: whether the server has shard channels (SPUBLISH, Redis 7.0 on).
--
-- Sent only when the server hides its version (an ACL without INFO), so that a Redis
-- 6.2 server is not sent SPUBLISH, which it does not have. SPUBLISH with no arguments
-- never runs: a server that knows it refuses the call for its arguments (it checks
-- the arguments before the user's permissions); one that does not, for the name.
--
-- No keys, no arguments.
-- Returns 1 if the server knows SPUBLISH, 0 if it does not.
local reply = redis.pcall('spublish')
if type(reply) == 'table' and reply.err and string.find(reply.err, 'Unknown', 1, true) then
  return 0
end
return 1
