-- remove_dead.lua: remove and return the dead letters of some tasks, or all of them.
-- KEYS: 1 ready (unused), 2 processing (unused), 3 lease_index (unused), 4 leases (unused),
--       5 delayed (unused), 6 dead, 7 processing_ts (unused)
-- ARGV[1..n] task ids, or ARGV[1] = '*' for every entry
-- Returns the removed entries (JSON), newest first. One pass over the list whatever n is:
-- O(dead letters + n). (An LREM per entry, or a call per task, made `dead retry --all` quadratic.)
local entries = redis.call('LRANGE', DEAD, 0, -1)
if ARGV[1] == '*' then
  redis.call('DEL', DEAD)
  return entries
end
local wanted = {}
for _, id in ipairs(ARGV) do wanted[tonumber(id)] = true end
-- The task id of an entry dead_letter.lua wrote, without decoding it: the top-level key is the
-- only "task_id": whose quotes are not escaped (inside the payload or reason strings they are).
local function task_of(entry)
  local id = string.match(entry, '"task_id":(%d+)[,}]')
  if id then return tonumber(id) end
  local ok, data = pcall(cjson.decode, entry)  -- written by someone else, or an id cjson wrote as 1e+15
  if ok and type(data) == 'table' then return tonumber(data.task_id) end
  return nil
end
local removed, kept = {}, {}
for _, entry in ipairs(entries) do
  local id = task_of(entry)
  if id and wanted[id] then
    removed[#removed + 1] = entry
  else
    kept[#kept + 1] = entry
  end
end
if #removed > 0 then
  -- Rebuilt in order (newest left), in chunks that unpack() can take.
  redis.call('DEL', DEAD)
  for i = 1, #kept, 1000 do
    redis.call('RPUSH', DEAD, unpack(kept, i, math.min(i + 999, #kept)))
  end
end
return removed
