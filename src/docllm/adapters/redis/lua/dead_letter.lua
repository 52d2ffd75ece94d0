-- dead_letter.lua: keep a payload given up on, with its reason, in the dead-letter list.
-- KEYS: 1 ready (unused), 2 processing, 3 lease_index, 4 leases, 5 delayed (unused), 6 dead,
--       7 processing_ts
-- ARGV[1] token     '' for none: just record ARGV[2]; else only while the token holds its lease
-- ARGV[2] raw       the payload to record when there is no token
-- ARGV[3] reason
-- ARGV[4] at_ms     authority time
-- ARGV[5] task_id   '' for unknown (with a token, the lease's task id is used)
-- ARGV[6] once      '1' (no token, a task id): not when a dead letter of that task is already
--                   kept. O(dead letters): only the rare fallback for a lease Redis lost uses it.
-- Returns 1 when recorded, 0 (and nothing changes) when the token holds no lease or, with once,
-- the task already has a dead letter.
local raw, task_id = ARGV[2], tonumber(ARGV[5])
if ARGV[1] ~= '' then
  local lease = take_lease(ARGV[1])
  if not lease then return 0 end
  raw = lease.raw  -- the queue's own copy, byte for byte
  if not task_id and type(lease.task_id) == 'number' then task_id = lease.task_id end
elseif ARGV[6] == '1' and task_id then
  for _, kept in ipairs(redis.call('LRANGE', DEAD, 0, -1)) do
    local ok, data = pcall(cjson.decode, kept)
    if ok and type(data) == 'table' and tonumber(data.task_id) == task_id then return 0 end
  end
end
local entry = {payload = raw, reason = ARGV[3], at_ms = tonumber(ARGV[4]), task_id = task_id}
redis.call('LPUSH', DEAD, cjson.encode(entry))
return 1
