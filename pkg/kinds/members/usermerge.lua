local out = {}
for i = 2, #ARGV, 2 do
  local r = mergeum(KEYS[1], ARGV[i], ARGV[i+1])
  out[#out+1] = r[1] out[#out+1] = r[2]
end
if ARGV[1] == "1" then
  leftcount(KEYS[1])
  redis.call('HSET', KEYS[1], ':loaded', '1')
end
if KEYS[2] then out[#out+1] = redis.call('HGET', KEYS[2], 'g') or "-1" end
return out
