-- ack.lua: end a lease; its payload is done with the queue.
-- KEYS: 1 ready (unused), 2 processing, 3 lease_index, 4 leases, 5 delayed (unused),
--       6 dead (unused), 7 processing_ts
-- ARGV[1] token
-- Returns 1 when the token held the lease, 0 (and nothing changes) otherwise.
if take_lease(ARGV[1]) then return 1 end
return 0
