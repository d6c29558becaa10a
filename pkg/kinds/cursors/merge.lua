-- a mark (strict) never merges into a hash Redis lost (stale 4)
if ARGV[3] == "1" and redis.call('HEXISTS', KEYS[1], ':loaded') == 0 then return {0, "", "0", 4} end
local r = merge(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if KEYS[2] then
  r[3], r[4] = r[3] or "0", r[4] or 0
  r[5] = redis.call('HGET', KEYS[2], 'g') or "-1"
end
return r
