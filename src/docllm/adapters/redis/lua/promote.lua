-- promote.lua: move delayed payloads that are due into ready.
-- KEYS: 1 ready, 2 processing (unused), 3 lease_index (unused), 4 leases (unused), 5 delayed,
--       6 dead (unused), 7 processing_ts (unused)
-- ARGV[1] now_ms   authority time; due when due_ms <= now_ms
-- ARGV[2] limit    at most this many
-- Returns how many moved.
return promote(tonumber(ARGV[1]), tonumber(ARGV[2]))
