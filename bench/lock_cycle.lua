-- wrk script: lock cycles. Each cycle is POST /locks/<unique name> (201 with a token) then
-- DELETE /locks/<name> with that token in Lock-Token (204). With the argument `semaphores`
-- (`wrk ... -s bench/lock_cycle.lua URL -- semaphores`), permit cycles of semaphores of 4
-- permits instead: POST /semaphores/<unique name> {"permits":4}, then DELETE; with `shared`,
-- readers' grants of read/write locks: POST /locks/<unique name> {"mode":"shared"}; with
-- `multi`, multi-locks of two names: POST /locks {"names":[<name>:a, <name>:b]}, then
-- DELETE /locks?name=<name>:a&name=<name>:b.
--
-- wrk builds requests per thread, not per connection, so a thread keeps a queue of grants
-- whose release is due: the next request a connection sends is a pending release if there is
-- one, else a fresh acquire. Unexpected statuses are counted and printed at the end.

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  collection = "/locks/"
  body = nil
  multi = false
  if args[1] == "semaphores" then
    collection = "/semaphores/"
    body = '{"permits":4}'
  elseif args[1] == "shared" then
    body = '{"mode":"shared"}'
  elseif args[1] == "multi" then
    multi = true
  end
  counter = 0
  pending = {}
  head, tail = 1, 0
  bad = 0
  -- Unique across runs too: locks a previous run left held must not collide with these.
  math.randomseed(os.time() * 100 + id)
  prefix = "bench-" .. os.time() .. "-" .. id .. "-" .. math.random(1, 1e9) .. "-"
end

function request()
  if tail >= head then
    local grant = pending[head]
    pending[head] = nil
    head = head + 1
    if multi then
      local base = string.sub(grant[1], 1, -3)
      local path = "/locks?name=" .. base .. ":a&name=" .. base .. ":b"
      return wrk.format("DELETE", path, { ["Lock-Token"] = grant[2] })
    end
    return wrk.format("DELETE", collection .. grant[1], { ["Lock-Token"] = grant[2] })
  end
  counter = counter + 1
  if multi then
    local name = prefix .. counter
    return wrk.format("POST", "/locks", nil, '{"names":["' .. name .. ':a","' .. name .. ':b"]}')
  end
  return wrk.format("POST", collection .. prefix .. counter, nil, body)
end

function response(status, headers, body)
  if status == 201 then
    local name = body:match('"name":"([^"]+)"')
    local token = body:match('"token":"([^"]+)"')
    tail = tail + 1
    pending[tail] = { name, token }
  elseif status ~= 204 then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local total_bad = 0
  for _, thread in ipairs(threads) do
    total_bad = total_bad + (thread:get("bad") or 0)
  end
  io.write(string.format("unexpected_statuses %d\n", total_bad))
end
