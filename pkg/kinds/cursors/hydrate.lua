local from = 1
if KEYS[2] then
  if not intact(KEYS[2], ARGV[1]) then return 0 end
  from = 2
end
for i = from, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1], "0", ARGV[i+1]) end
redis.call('HSET', KEYS[1], ':loaded', '1')
return 1
