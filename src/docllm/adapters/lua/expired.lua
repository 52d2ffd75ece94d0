-- expired.lua: leases whose deadline has passed, oldest deadline first. Reads only the expired
-- members of the index: O(log n + expired), whatever is in flight.
-- KEYS: 1 ready (unused), 2 processing (unused), 3 lease_index, 4 leases, 5 delayed (unused),
--       6 dead (unused), 7 processing_ts (unused)
-- ARGV[1] now_ms   authority time; a lease has expired when its deadline < now_ms
-- ARGV[2] limit    at most this many
-- Returns a flat list: token, deadline_ms, lease JSON, token, ...
-- An index entry without lease data is removed and not returned (see lib.lua, lease_of).
local found = redis.call('ZRANGEBYSCORE', LEASE_INDEX, '-inf', '(' .. ARGV[1],
  'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #found, 2 do
  local data = redis.call('HGET', LEASES, found[i])
  if data then
    out[#out + 1] = found[i]
    out[#out + 1] = found[i + 1]
    out[#out + 1] = data
  else
    redis.call('ZREM', LEASE_INDEX, found[i])
  end
end
return out
