-- Queue leave: a fair waiter gives up its place (its wait ended, its client went away).
--
-- KEYS[1]  the lock key (its head channel is `<KEYS[1]>:head:<gateway>`)
-- KEYS[2]  the lock's queue (see fair_head.lua)
-- KEYS[3]  the queue's liveness hash
-- ARGV[1]  the member, `<gateway>:<waiter>`
--
-- Returns 1 if the member was queued, else 0.
return leave_queue(KEYS[1], KEYS[2], KEYS[3], ARGV[1], time_ms(redis.call('TIME')))
