-- the user's fence is still the one the restore waited for (ARGV[1], ""
-- none): an unload since (UnloadUsers, after a degraded write) left a
-- newer one, whose records the restore's Postgres read may lack
if (redis.call('GET', KEYS[2]) or "") ~= ARGV[1] then return 0 end
local from = 2
if KEYS[3] then
  if not intact(KEYS[3], ARGV[2]) then return 0 end
  from = 3
end
for i = from, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1], "0", ARGV[i+1]) end
redis.call('HSET', KEYS[1], ':loaded', '1')
return 1
