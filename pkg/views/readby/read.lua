-- Reads a channel's view atomically. KEYS = cur, stream, loaded;
-- ARGV[1] = the most cursor fields to read (negative: all). Returns {flat
-- cur hash (empty when it holds more fields than ARGV[1]), last stream id
-- or "", loaded 0|1, 1 when the cursors were left out}.
local cur, large = {}, 0
local most = tonumber(ARGV[1])
if most >= 0 and redis.call('HLEN', KEYS[1]) > most then large = 1 else cur = redis.call('HGETALL', KEYS[1]) end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = ""
if #last > 0 then id = last[1][1] end
return {cur, id, redis.call('EXISTS', KEYS[3]), large}
