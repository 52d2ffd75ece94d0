-- lib.lua: helpers prepended to every queue script by redis_queue.py (a script cannot include
-- another). Scripts never call TIME: the adapter passes the authority's now_ms.
-- KEYS (the same eleven in every script, RedisKeys.script_keys):
--   1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed, 6 dead, 7 processing_ts,
--   8 staging, 9 staging_seen, 10 clock, 11 cancelled
local READY, PROCESSING, LEASE_INDEX, LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local DELAYED, DEAD, PROCESSING_TS = KEYS[5], KEYS[6], KEYS[7]
local STAGING, STAGING_SEEN, CLOCK = KEYS[8], KEYS[9], KEYS[10]
local CANCELLED = KEYS[11]

-- Steps of the authority clock (DESIGN section 6: an NTP step, a VM resume, a failover to a host
-- whose clock is elsewhere). A process's clock (redis_clock.py) sees a step when TIME disagrees
-- with its monotonic clock, and records it here (clock_step.lua) before it hands the new time to
-- anyone: a quiet window of one lease from the step, on the old clock and on the new one, since
-- processes that have not re-read TIME yet still count on the old one. No lease is reclaimed by a
-- caller whose time falls in a window, and a lease that was live before the step (its deadline
-- past the window's floor) may still be renewed, so every live worker renews on the new clock
-- first. The windows live in Redis: every process agrees on them whatever its own schedule.
-- Entries "from:until:floor" of the list CLOCK, newest first (windows of different clocks cannot
-- be ordered by time). Mirrored by adapters/clock_steps.py.

-- The lowest floor of the quiet windows `now` falls in, or nil when reclaims may go on.
local function clock_quiet(now)
  local lowest = nil
  for _, w in ipairs(redis.call('LRANGE', CLOCK, 0, -1)) do
    local from, until_ms, floor = string.match(w, '^(%-?%d+):(%-?%d+):(%-?%d+)$')
    from, until_ms, floor = tonumber(from), tonumber(until_ms), tonumber(floor)
    if from <= now and now < until_ms and (lowest == nil or floor < lowest) then lowest = floor end
  end
  return lowest
end

-- Whether a lease with this deadline may be renewed at `now`: it has not expired, or it expired
-- only because the clock stepped under it.
local function renewable(deadline, now)
  if deadline >= now then return true end
  local floor = clock_quiet(now)
  return floor ~= nil and deadline > floor
end

-- The positive integer task id a payload names, as a string, or nil. A malformed payload is
-- still leased (its caller dead-letters it), so a decode error must not abort the script.
local function task_id_of(raw)
  local ok, data = pcall(cjson.decode, raw)
  if not ok or type(data) ~= 'table' then return nil end
  local id = data['task_id']
  if type(id) == 'string' and string.match(id, '^%s*%d+%s*$') then id = tonumber(id) end
  if type(id) ~= 'number' or id < 1 or id >= 2 ^ 53 or id ~= math.floor(id) then return nil end
  return string.format('%d', id)
end

-- Whether an operator cancelled the task `raw` names (docllm cancel): its claimer fails it at once.
local function cancelled(raw)
  local task_id = task_id_of(raw)
  return task_id ~= nil and redis.call('HEXISTS', CANCELLED, task_id) == 1
end

-- Move up to `limit` delayed payloads due at `now` (inclusive) to the far end of ready, oldest
-- due first. Returns how many moved.
local function promote(now, limit)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, limit)
  for _, raw in ipairs(due) do
    redis.call('LPUSH', READY, raw)
    redis.call('ZREM', DELAYED, raw)
  end
  return #due
end

-- The decoded lease of `token`, or nil when the token holds none. No script writes an index
-- entry without lease data; should one appear anyway, nothing can be recovered from it, so it
-- is removed on sight.
local function lease_of(token)
  if not redis.call('ZSCORE', LEASE_INDEX, token) then return nil end
  local data = redis.call('HGET', LEASES, token)
  if not data then
    redis.call('ZREM', LEASE_INDEX, token)
    return nil
  end
  return cjson.decode(data)
end

-- End the lease of `token`: its payload leaves processing with it. Returns the lease or nil.
local function take_lease(token)
  local lease = lease_of(token)
  if not lease then return nil end
  -- From the tail: processing is in claim order, and the oldest leases are the usual ones to end.
  redis.call('LREM', PROCESSING, -1, lease.raw)
  redis.call('ZREM', LEASE_INDEX, token)
  redis.call('HDEL', LEASES, token)
  if type(lease.task_id) == 'number' then
    redis.call('HDEL', PROCESSING_TS, string.format('%d', lease.task_id))
  end
  return lease
end

-- Put `raw` into processing under a new lease `token` held by `holder` until now + lease_ms.
local function lease(raw, token, holder, now, lease_ms)
  redis.call('LPUSH', PROCESSING, raw)
  local task_id = task_id_of(raw)
  local data = {raw = raw, holder = holder, claimed_at = now, task_id = tonumber(task_id)}
  redis.call('HSET', LEASES, token, cjson.encode(data))
  redis.call('ZADD', LEASE_INDEX, now + lease_ms, token)
  if task_id then
    -- The original note's display hash: claim time in whole seconds.
    redis.call('HSET', PROCESSING_TS, task_id, math.floor(now / 1000))
  end
end
