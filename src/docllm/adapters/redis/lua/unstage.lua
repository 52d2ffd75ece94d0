-- unstage.lua: a claimer that died between its blocking wait and lease_staged left its payload
-- in staging; put such payloads back at the front of ready once they were seen there for grace_ms.
-- Staging holds only payloads in the middle of a claim, so this reads a handful of items.
-- KEYS: see lib.lua (1 ready, 8 staging, 9 staging_seen)
-- ARGV[1] now_ms    authority time
-- ARGV[2] grace_ms
-- ARGV[3] limit     at most this many staged payloads are looked at
-- Returns how many went back to ready.
local now, grace = tonumber(ARGV[1]), tonumber(ARGV[2])
local present, moved = {}, 0
for _, raw in ipairs(redis.call('LRANGE', STAGING, 0, tonumber(ARGV[3]) - 1)) do
  local seen = tonumber(redis.call('HGET', STAGING_SEEN, raw))
  if not seen or seen > now then  -- (seen later than now: the clock stepped back; count from now)
    redis.call('HSET', STAGING_SEEN, raw, now)
    present[raw] = true
  elseif now - seen >= grace then
    redis.call('LREM', STAGING, 1, raw)
    redis.call('HDEL', STAGING_SEEN, raw)
    route(raw, true)
    moved = moved + 1
  else
    present[raw] = true
  end
end
for _, raw in ipairs(redis.call('HKEYS', STAGING_SEEN)) do
  if not present[raw] then redis.call('HDEL', STAGING_SEEN, raw) end
end
return moved
