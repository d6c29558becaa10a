local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  if string.sub(cur, 1, 1) == "1" then redis.call('HINCRBY', KEYS[1], ':n', -1) end
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
