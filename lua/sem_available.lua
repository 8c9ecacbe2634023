-- sem_available.lua: how many permits of a semaphore are held now (read only).
--
-- KEYS[1]  the semaphore's leases (sorted set: permit -> deadline in ms)
--
-- Counts the permits whose deadline has not passed by this server's clock (expired
-- ones not yet dropped do not count).
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return redis.call('zcount', KEYS[1], '(' .. now, '+inf')
