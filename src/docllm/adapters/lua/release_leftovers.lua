-- release_leftovers.lua: what the original note's workers left behind goes back to work. One page
-- of what `leftovers` found (each seen twice, a grace apart) per call.
-- KEYS: see lib.lua (1 ready, 2 processing, 3 lease_index, 7 processing_ts)
-- ARGV[1]           n, how many payloads follow
-- ARGV[2 .. n+1]    payloads: one copy of each leaves processing for the claim end of ready
-- ARGV[n+2 ..]      task_id, value pairs: the processing_ts entry is deleted if it still holds value
-- Returns how many payloads moved.
-- Every lease has its own entry in processing (lib.lua: lease, take_lease), so a payload moves only
-- while processing holds more entries than there are leases: a leased copy is never taken once the
-- lease-less ones are gone. Copies of one payload are the same bytes, so which copy goes is moot.
local n, moved = tonumber(ARGV[1]), 0
for i = 2, n + 1 do
  if redis.call('LLEN', PROCESSING) <= redis.call('ZCARD', LEASE_INDEX) then break end
  -- From the tail: the processing list is in claim order and leftovers are the oldest entries.
  if redis.call('LREM', PROCESSING, -1, ARGV[i]) == 1 then
    redis.call('RPUSH', READY, ARGV[i])
    moved = moved + 1
  end
end
for i = n + 2, #ARGV - 1, 2 do
  if redis.call('HGET', PROCESSING_TS, ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', PROCESSING_TS, ARGV[i])
  end
end
return moved
