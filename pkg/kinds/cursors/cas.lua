local out = {}
local gens = {}
for i = 1, #KEYS, 2 do
  local a = (i - 1) / 2 * 3
  local f, want = ARGV[a + 1], ARGV[a + 2]
  local g = gens[KEYS[i + 1]]
  if not g then
    g = redis.call('HGET', KEYS[i + 1], 'g') or "-1"
    gens[KEYS[i + 1]] = g
  end
  local c = redis.call('HGET', KEYS[i], f) or ""
  -- A hash Redis lost holds no field: only a write of a new field (want
  -- "") could land in one, so only it asks whether the hash is loaded.
  if want == "" and c == "" and redis.call('HEXISTS', KEYS[i], ':loaded') == 0 then
    out[#out + 1] = 2
    out[#out + 1] = g
    out[#out + 1] = ""
  elseif c == want then
    redis.call('HSET', KEYS[i], f, ARGV[a + 3])
    out[#out + 1] = 1
    out[#out + 1] = g
    out[#out + 1] = ""
  else
    out[#out + 1] = 0
    out[#out + 1] = g
    out[#out + 1] = c
  end
end
return out
