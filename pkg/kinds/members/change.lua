local inc = reg(ARGV[2])
local t = redis.call('TIME')
inc[3] = b62(string.format("%d", tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local c = reg(cur)
  if cmp(inc[2], c[2]) < 0 or (inc[2] == c[2] and cmp(inc[3], c[3]) <= 0) then
    local n = 0
    for i = 1, #c[3] do n = n * 62 + string.find(D, string.sub(c[3], i, i), 1, true) - 1 end
    inc[2], inc[3] = c[2], b62(string.format("%d", n + 1))
  end
end
local v = table.concat(inc, " ")
local counted = leftcount(KEYS[1])
redis.call('HSET', KEYS[1], ARGV[1], v)
if counted then countflag(KEYS[1], ':l', cur, v, "0") end
return {1, v, redis.call('HGET', KEYS[2], 'g') or "-1"}
