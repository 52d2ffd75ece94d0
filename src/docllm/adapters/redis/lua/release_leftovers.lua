-- release_leftovers.lua: what the original note's workers left behind goes back to work. One page
-- of what `leftovers` found (each seen twice, a grace apart) per call.
-- KEYS: see lib.lua (1 ready, 2 processing, 3 lease_index, 7 processing_ts)
-- ARGV[1]           seen_at_s: authority seconds read before the snapshot that found them
-- ARGV[2]           n, how many payloads follow
-- ARGV[3 .. n+2]    payloads: one copy of each leaves processing for the claim end of ready
-- ARGV[n+3 ..]      task_id, value pairs: the processing_ts entry is deleted if it still holds value
-- Returns how many payloads moved.
-- A leased copy is never taken. Every lease has its own entry in processing (lib.lua), so nothing
-- moves once processing holds no more entries than there are leases; and a payload whose task was
-- claimed since the snapshot (its claim stamped processing_ts at or after seen_at_s) may be leased
-- now, so it stays for the next sweep to look at again. Copies of one payload are the same bytes.
local since, n, moved = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
-- Stamps first: a leftover's own stamp (an old worker's clock may run ahead) must not read as a claim.
for i = n + 3, #ARGV - 1, 2 do
  if redis.call('HGET', PROCESSING_TS, ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', PROCESSING_TS, ARGV[i])
  end
end
for i = 3, n + 2 do
  if redis.call('LLEN', PROCESSING) <= redis.call('ZCARD', LEASE_INDEX) then break end
  local raw, claimed = ARGV[i], false
  local task_id = task_id_of(raw)
  if task_id then
    local stamp = tonumber(redis.call('HGET', PROCESSING_TS, task_id))
    claimed = stamp ~= nil and stamp >= since
  end
  -- From the tail: the processing list is in claim order and leftovers are the oldest entries.
  if not claimed and redis.call('LREM', PROCESSING, -1, raw) == 1 then
    route(raw, true)
    moved = moved + 1
  end
end
return moved
