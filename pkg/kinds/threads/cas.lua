local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ""
local g = "-1"
if KEYS[2] then
  g = redis.call('HGET', KEYS[2], 'g') or "-1"
  if ARGV[5] == "1" and redis.call('HEXISTS', KEYS[1], ':loaded') == 0 then return {2, cur, g} end
  -- a register absent from a collected hash may be in Postgres only
  if ARGV[5] == "1" and cur == "" and ARGV[6] ~= "1" and redis.call('HEXISTS', KEYS[1], ':collected') == 1 then return {3, cur, g} end
end
if cur ~= ARGV[2] or g ~= ARGV[3] then return {0, cur, g} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return {1, cur, g}
