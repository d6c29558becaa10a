-- Merges registers into a user's hash (notification.Merge). KEYS[1] = the
-- user's hash; ARGV = mark ("1": set ":loaded" after), the TTL (ms) of a
-- hash that holds ":loaded" alone, then channel, register pairs. Returns,
-- per pair, {changed, register}. A hash of a user who set nothing only
-- caches "none" and expires, so only active users keep one; a register in
-- it never expires.
local out = {}
for i = 3, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur and ncmp(nreg(ARGV[i+1]), nreg(cur)) <= 0 then
    out[#out+1] = 0 out[#out+1] = cur
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+1])
    out[#out+1] = 1 out[#out+1] = ARGV[i+1]
  end
end
if ARGV[1] == "1" then redis.call('HSET', KEYS[1], ':loaded', '1') end
if redis.call('HLEN', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], ':loaded') == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('PERSIST', KEYS[1])
end
return out
