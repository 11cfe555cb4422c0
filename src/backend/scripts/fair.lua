-- Prelude: taking a place in a lock's fair queue and leaving it (see src/backend/queue.rs), for
-- the scripts of fair waiters. Builds on fair_head.lua (the queue's shape, its head), which
-- comes before it. Only `local` names are defined here.

local PRIORITY_STEP = 17592186044416 -- 2^44

-- Puts `member` in `queue` unless it is there (at `score` if given: a place it had before it
-- was skipped), and marks its gateway alive for `window` ms from `now` (Redis TIME, `time` as
-- its reply); both keys then live three windows more. A member put in is described in `live`
-- by `<seconds>:<microseconds>:<owner>` (`owner` may be ''): whom the place is for and since
-- when, what inspect shows of the queue (TIME's two strings as they are: a number made text
-- in Lua costs Redis more than the rest of the description). Returns the member's score.
local function enqueue(queue, live, member, priority, score, owner, time, now, window)
  local kept = redis.call('ZSCORE', queue, member)
  if kept then
    score = tonumber(kept)
    redis.call('HSET', live, gateway_of(member), now + window)
  else
    if not score then
      score = (9 - priority) * PRIORITY_STEP + redis.call('HINCRBY', live, '#seq', 1)
    end
    redis.call('ZADD', queue, score, member)
    redis.call('HSET', live, gateway_of(member), now + window,
      member, time[1] .. ':' .. time[2] .. ':' .. owner)
  end
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
    if not head then
      -- The last: queue_head() deleted both keys, the description with them.
      return 1
    end
    call_head(lock, gateway)
  end
  redis.call('HDEL', live, member)
  return 1
end
