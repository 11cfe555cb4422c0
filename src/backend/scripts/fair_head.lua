-- Prelude: who heads a lock's fair queue (see src/backend/queue.rs and fair.lua, which builds on
-- it), for the scripts of fair waiters and for queue_clear.lua. Only `local` names are defined
-- here.
--
-- The queue is a sorted set of members `<gateway>:<waiter>` scored
-- (9 - priority) * 2^44 + arrival (exact in a double: at most 10 * 2^44 < 2^53), and beside
-- it a hash of each gateway's deadline (Redis TIME, ms) until which its waiters count as
-- alive, the arrival counter, field `#seq`, and each member's description (see enqueue() in
-- fair.lua), field the member itself (gateway identities are hex, members have a `:`: no
-- clash).

-- Redis TIME (the reply of redis.call('TIME')) in milliseconds.
local function time_ms(time)
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- The gateway part of a member, `<gateway>:<waiter>`.
local function gateway_of(member)
  return string.match(member, '^[^:]*')
end

-- The queue's first member whose gateway is alive at `now`, and that gateway; the members
-- before it (of gateways taken for dead) are removed. nil when the queue is empty, whose two
-- keys are then deleted.
local function queue_head(queue, live, now)
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      redis.call('DEL', queue, live)
      return nil
    end
    local gateway = gateway_of(head)
    local deadline = tonumber(redis.call('HGET', live, gateway))
    if deadline and deadline >= now then
      return head, gateway
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', live, head)
  end
end
