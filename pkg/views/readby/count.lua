-- Counts a large channel's view. KEYS = r, d; ARGV = seq, excluded user
-- ("" none). Returns {read >= seq, delivered >= seq, |r|, |d|, least r,
-- least d}, the excluded user left out of the counts.
local out = {}
for i = 1, 2 do
  local n = redis.call('ZCOUNT', KEYS[i], ARGV[1], '+inf')
  if ARGV[2] ~= "" then
    local sc = redis.call('ZSCORE', KEYS[i], ARGV[2])
    if sc and tonumber(sc) >= tonumber(ARGV[1]) then n = n - 1 end
  end
  out[i] = n
end
for i = 1, 2 do out[2 + i] = redis.call('ZCARD', KEYS[i]) end
for i = 1, 2 do
  local least = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if #least == 2 then out[4 + i] = math.floor(tonumber(least[2])) else out[4 + i] = 0 end
end
return out
