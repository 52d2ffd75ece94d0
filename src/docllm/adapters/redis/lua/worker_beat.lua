-- worker_beat.lua: write one worker's record with a TTL and index it by when it expires.
-- Loaded on its own (not with lib.lua): it touches only these two keys.
-- KEYS[1] the registry's index (RedisKeys.workers): worker id scored by expiry (ms)
-- KEYS[2] the worker's hash (RedisKeys.worker(id))
-- ARGV[1] worker id
-- ARGV[2] now_ms     authority time
-- ARGV[3] ttl_ms
-- ARGV[4..] field, value, field, value... of the record
-- The hash's PX removes a dead worker's record; the index entry is removed by the next reader.
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
return 1
