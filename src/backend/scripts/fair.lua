-- Prelude: a lock's fair queue (see src/backend/queue.rs), for the scripts that take a place
-- in it, leave it, or must not overtake it. Only `local` names are defined here.
--
-- The queue is a sorted set of members `<gateway>:<waiter>` scored
-- (9 - priority) * 2^44 + arrival (exact in a double: at most 10 * 2^44 < 2^53), and beside
-- it a hash of each gateway's deadline (Redis TIME, ms) until which its waiters count as
-- alive, and the arrival counter, field `#seq` (gateway identities are hex: no clash).

local PRIORITY_STEP = 17592186044416 -- 2^44

-- Redis TIME (the reply of redis.call('TIME')) in milliseconds.
local function time_ms(time)
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local function gateway_of(member)
  return string.match(member, '^[^:]*')
end

-- Puts `member` in `queue` unless it is there (at `score` if given: a place it had before it
-- was skipped), and marks its gateway alive for `window` ms from `now`; both keys then live
-- three windows more. Returns the member's score.
local function enqueue(queue, live, member, priority, score, now, window)
  local kept = redis.call('ZSCORE', queue, member)
  if kept then
    score = tonumber(kept)
  else
    if not score then
      score = (9 - priority) * PRIORITY_STEP + redis.call('HINCRBY', live, '#seq', 1)
    end
    redis.call('ZADD', queue, score, member)
  end
  redis.call('HSET', live, gateway_of(member), now + window)
  redis.call('PEXPIRE', queue, 3 * window)
  redis.call('PEXPIRE', live, 3 * window)
  return score
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
  end
end

-- Tells `gateway` that its waiter heads the queue of the lock `lock`.
local function call_head(lock, gateway)
  redis.call('PUBLISH', lock .. ':head:' .. gateway, '')
end

-- Takes `member` out of the queue; if it was first, tells the next head's gateway. Returns 1
-- if it was queued.
local function leave_queue(lock, queue, live, member, now)
  local rank = redis.call('ZRANK', queue, member)
  if not rank then
    return 0
  end
  redis.call('ZREM', queue, member)
  if rank == 0 then
    local head, gateway = queue_head(queue, live, now)
    if head then
      call_head(lock, gateway)
    end
  end
  return 1
end
