-- stats.lua: the queue's sizes in one consistent read.
-- KEYS: 1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed, 6 dead, 7 processing_ts
-- ARGV: none
-- Returns {ready, processing (leases), delayed, dead, oldest_claimed_at_ms or false}.
-- The oldest claim is the tail of processing (claim order); its time comes from processing_ts,
-- so it has whole-second precision. When that payload names no task, the claim time of the lease
-- nearest its deadline stands in. O(1) either way: no scan of what is in flight.
local oldest = false
local tail = redis.call('LINDEX', PROCESSING, -1)
local task_id = tail and task_id_of(tail)
local seconds = task_id and redis.call('HGET', PROCESSING_TS, task_id)
if seconds then
  oldest = tonumber(seconds) * 1000
else
  local first = redis.call('ZRANGE', LEASE_INDEX, 0, 0)
  local data = first[1] and redis.call('HGET', LEASES, first[1])
  if data then oldest = cjson.decode(data).claimed_at end
end
return {ready_count(), redis.call('ZCARD', LEASE_INDEX), redis.call('ZCARD', DELAYED),
  redis.call('LLEN', DEAD), oldest}
