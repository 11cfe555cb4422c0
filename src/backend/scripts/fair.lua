-- Prelude: taking a place in a lock's fair queue and leaving it (see src/backend/queue.rs), for
-- the scripts of fair waiters. Builds on fair_head.lua (the queue's shape, its head), which
-- comes before it. Only `local` names are defined here.

local PRIORITY_STEP = 17592186044416 -- 2^44

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
