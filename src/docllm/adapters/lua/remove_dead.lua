-- remove_dead.lua: remove and return the dead letters of one task, or all of them.
-- KEYS: 1 ready (unused), 2 processing (unused), 3 lease_index (unused), 4 leases (unused),
--       5 delayed (unused), 6 dead, 7 processing_ts (unused)
-- ARGV[1] task_id   '' for every entry
-- Returns the removed entries (JSON), newest first. An operator's command: O(dead letters).
local entries = redis.call('LRANGE', DEAD, 0, -1)
if ARGV[1] == '' then
  redis.call('DEL', DEAD)
  return entries
end
local wanted, removed = tonumber(ARGV[1]), {}
for _, entry in ipairs(entries) do
  local ok, data = pcall(cjson.decode, entry)
  if ok and type(data) == 'table' and tonumber(data.task_id) == wanted then
    removed[#removed + 1] = entry
  end
end
for _, entry in ipairs(removed) do
  redis.call('LREM', DEAD, 0, entry)  -- equal entries are all in `removed`: count 0 is safe
end
return removed
