local out = {}
for i = 2, #ARGV, 2 do
  local r = mergecm(KEYS[1], ARGV[i], ARGV[i+1])
  out[#out+1] = r[1] out[#out+1] = r[2]
end
if ARGV[1] == "1" then redis.call('HSET', KEYS[1], ':loaded', '1') end
out[#out+1] = tonumber(redis.call('HGET', KEYS[1], ':n') or "0")
return out
