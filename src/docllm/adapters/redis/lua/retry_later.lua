-- retry_later.lua: end a lease and park its payload in the delayed set until it is due.
-- KEYS: 1 ready (unused), 2 processing, 3 lease_index, 4 leases, 5 delayed, 6 dead (unused),
--       7 processing_ts
-- ARGV[1] token
-- ARGV[2] due_ms   authority time at which the payload may be claimed again
-- Returns 1 when the token held the lease, 0 (and nothing changes) otherwise.
local lease = take_lease(ARGV[1])
if not lease then return 0 end
redis.call('ZADD', DELAYED, tonumber(ARGV[2]), lease.raw)
return 1
