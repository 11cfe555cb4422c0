-- Queue clear: after a plain acquire found the lock free but a fair queue in its way (reply
-- {5} of acquire.lua), takes out the queue's waiters whose gateways are dead (queue_head() of
-- fair_head.lua), so that a queue nobody live waits in stops nobody. The gateway then runs the
-- acquire again. Kept out of acquire.lua so that every plain acquire does not pay Redis for
-- defining what this rare look needs.
--
-- KEYS[1]  the lock's queue
-- KEYS[2]  the queue's liveness hash
--
-- Returns 1 when no live waiter is queued (the queue is gone), 0 when one is.
if queue_head(KEYS[1], KEYS[2], time_ms(redis.call('TIME'))) then
  return 0
end
return 1
