-- claim.lua: promote due retries, then lease up to one ready payload per token given. Never blocks.
-- KEYS: see lib.lua (1 ready, 2 processing, 3 lease_index, 4 leases, 5 delayed, 7 processing_ts)
-- ARGV[1] now_ms         authority time
-- ARGV[2] lease_ms       each lease's deadline is now_ms + lease_ms
-- ARGV[3] holder         who takes them, for display
-- ARGV[4] promote_batch  at most this many due delayed payloads move into ready first
-- ARGV[5..] tokens       one new lease token per payload wanted, in order
-- Returns the raw payloads as they sat in ready, oldest first (fewer than tokens when ready ran out),
-- each followed by 1 when its task carries an operator's cancel mark, else 0.
local now, lease_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
promote(now, tonumber(ARGV[4]))
local out = {}
for i = 5, #ARGV do
  local raw = redis.call('RPOP', READY)
  if not raw then break end
  lease(raw, ARGV[i], ARGV[3], now, lease_ms)
  out[#out + 1] = raw
  out[#out + 1] = cancelled(raw) and 1 or 0
end
return out
