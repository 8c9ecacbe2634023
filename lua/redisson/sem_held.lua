-- redisson/sem_held.lua: how many permits of a semaphore in the layout of Redisson's
-- RPermitExpirableSemaphore (see redisson/sem_acquire.lua) are held now, changing
-- nothing.
--
-- KEYS[1]  its permits' deadlines
--
-- Returns the number of permits whose deadline is still ahead.
local redisson = redisson_functions()
local now = redisson.now()
return redis.call('zcount', KEYS[1], '(' .. now, '+inf')
