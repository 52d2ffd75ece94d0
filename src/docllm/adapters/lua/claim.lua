-- claim.lua: promote due retries, then lease the next ready payload. Never blocks.
-- KEYS: 1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed, 6 dead (unused), 7 processing_ts
-- ARGV[1] now_ms         authority time
-- ARGV[2] lease_ms       the lease's deadline is now_ms + lease_ms
-- ARGV[3] token          the new lease's token
-- ARGV[4] holder         who takes it, for display
-- ARGV[5] promote_batch  at most this many due delayed payloads move into ready first
-- Returns the raw payload as it sat in ready, or false when ready is empty.
local now = tonumber(ARGV[1])
promote(now, tonumber(ARGV[5]))
local raw = redis.call('RPOP', READY)
if not raw then return false end
redis.call('LPUSH', PROCESSING, raw)
local task_id = task_id_of(raw)
local lease = {raw = raw, holder = ARGV[4], claimed_at = now, task_id = tonumber(task_id)}
redis.call('HSET', LEASES, ARGV[3], cjson.encode(lease))
redis.call('ZADD', LEASE_INDEX, now + tonumber(ARGV[2]), ARGV[3])
if task_id then
  -- The original note's display hash: claim time in whole seconds.
  redis.call('HSET', PROCESSING_TS, task_id, math.floor(now / 1000))
end
return raw
