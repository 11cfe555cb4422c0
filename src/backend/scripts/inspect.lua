-- Inspect: remaining ttl, the current grant's fence and its holder record, read in one atomic
-- step. The token never leaves the script.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the name's old per-name fence counter, for a grant of an older lockgate
-- KEYS[3]  the holder key
-- KEYS[4]  the holds hash of reentrant grants (see reenter.lua)
-- KEYS[5]  the lock's fair queue (see fair_head.lua)
-- KEYS[6]  the queue's liveness hash
-- ARGV[1]  '1' to have the grant's digest (below) computed; absent otherwise
--
-- Returns {-2, -1, false} when not held; else {pttl_ms, fence, record, shared, holds, queued,
--         grant, first}:
--         pttl -1 when the key has no expiry; fence -1 when the holder's token carries none
--         and no old counter exists; record the holder key's value, or false (the gateway
--         checks that its fence is the grant's); shared 1 when a set of grants kept beside
--         the lock holds it (its marker, a value beginning with '~'; fence -1, no record),
--         else 0; holds, for a reentrant grant,
--         how many times it is held, else 0; queued, the fair waiters in the queue; grant (when asked,
--         else false), the first 48 bits of the SHA-1 of the token's 22 characters of entropy (its stem): the
--         same for every copy of one grant (the nodes of a Redlock, whose fences differ until
--         the gateway raises them all to the highest), and no help in guessing the token;
--         first (absent when nobody queues), the queue's first 16 places whose gateway is
--         alive, in order, three values each: the member's gateway, its score, and its
--         description `<seconds>:<microseconds>:<owner>` (or false; see enqueue() in
--         fair.lua). Never the rest of a member (a waiter's number).
local holder = redis.call('GET', KEYS[1])
if not holder then
  return {-2, -1, false}
end
local queued = redis.call('ZCARD', KEYS[5])
-- Left out of the reply (nil) when nobody queues: an empty table costs every inspect.
local first
if queued > 0 then
  first = {}
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local places = redis.call('ZRANGE', KEYS[5], 0, 15, 'WITHSCORES')
  -- Per place, its gateway's deadline and its description, in one read.
  local fields = {}
  for i = 1, #places, 2 do
    fields[i] = string.match(places[i], '^[^:]*')
    fields[i + 1] = places[i]
  end
  local seen = redis.call('HMGET', KEYS[6], unpack(fields))
  for i = 1, #places, 2 do
    local deadline = tonumber(seen[i])
    if deadline and deadline >= now then
      first[#first + 1] = fields[i]
      first[#first + 1] = places[i + 1]
      first[#first + 1] = seen[i + 1]
    end
  end
end
if string.byte(holder, 1) == 126 then
  return {redis.call('PTTL', KEYS[1]), -1, false, 1, 0, queued, false, first}
end
local fence = tonumber(string.match(holder, '^[%w_-]+%.(%d+)$'))
  or tonumber(redis.call('GET', KEYS[2]))
  or -1
local grant = false
if ARGV[1] == '1' then
  grant = tonumber(string.sub(redis.sha1hex(string.sub(holder, 1, 22)), 1, 12), 16)
end
-- Only a token marked `o` after its 22 characters of entropy has a holder record.
local record = false
if string.sub(holder, 23, 23) == 'o' then
  record = redis.call('GET', KEYS[3])
end
-- A token marked `r` (after `o`, `s`, `m`, if any) is a reentrant grant's.
if string.match(string.sub(holder, 23), '^o?s?m?r') then
  local holds = tonumber(redis.call('HGET', KEYS[4], holder)) or 1
  return {redis.call('PTTL', KEYS[1]), fence, record, 0, holds, queued, grant, first}
end
return {redis.call('PTTL', KEYS[1]), fence, record, 0, 0, queued, grant, first}
