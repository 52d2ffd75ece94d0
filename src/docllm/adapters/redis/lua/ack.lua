-- ack.lua: end leases; their payloads are done with the queue. One token or a group of them (the
-- worker's acks of attempts that end together, runtime/grouped_acks.py), each ended as if alone.
-- KEYS: 1 ready (unused), 2 processing, 3 lease_index, 4 leases, 5 delayed (unused),
--       6 dead (unused), 7 processing_ts
-- ARGV[1..] tokens
-- Returns one 1 (the token held the lease) or 0 (and nothing changed for it) per token, in order.
local out = {}
for i = 1, #ARGV do
  out[i] = take_lease(ARGV[i]) and 1 or 0
end
return out
