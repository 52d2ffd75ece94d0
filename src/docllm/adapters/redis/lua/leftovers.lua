-- leftovers.lua: one consistent read of what the original note's workers may have left behind.
-- KEYS: see lib.lua (2 processing, 3 lease_index, 4 leases, 7 processing_ts)
-- ARGV: none
-- Returns false when nothing can be left over: every lease has one entry in processing and at most
-- one stamp (lib.lua), so with no more entries, nor stamps, than leases there is none to find. O(1).
-- Otherwise {processing (head first), processing_ts as field, value, ..., every lease's JSON}:
-- O(in flight), read at the reconciler's rate while leftovers exist.
local leases = redis.call('ZCARD', LEASE_INDEX)
if redis.call('LLEN', PROCESSING) <= leases and redis.call('HLEN', PROCESSING_TS) <= leases then
  return false
end
return {redis.call('LRANGE', PROCESSING, 0, -1), redis.call('HGETALL', PROCESSING_TS), redis.call('HVALS', LEASES)}
