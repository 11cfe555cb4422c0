-- Semaphore inspect: the limit and the live permits, without changing anything. (After
-- lease_set.lua.)
--
-- KEYS[1]  the permits (see permit_acquire.lua)
-- KEYS[2]  the semaphore's hash
--
-- Returns {limit or '', then lease_set.lua's live() list}.
local _, now_ms = clock()
local leases = live(KEYS[1], KEYS[2], now_ms)
if #leases == 0 then
  return {''}
end
table.insert(leases, 1, redis.call('HGET', KEYS[2], 'limit') or '')
return leases
