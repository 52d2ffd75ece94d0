-- requeue.lua: end a lease and put its payload back in ready at once.
-- KEYS: 1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed (unused), 6 dead (unused),
--       7 processing_ts
-- ARGV[1] token
-- ARGV[2] front   '1': the claim end of ready (claimed next); '0': the back, behind everything
-- Returns 1 when the token held the lease, 0 (and nothing changes) otherwise.
local lease = take_lease(ARGV[1])
if not lease then return 0 end
route(lease.raw, ARGV[2] == '1')  -- back to its own lane and tenant (lanes.lua)
return 1
