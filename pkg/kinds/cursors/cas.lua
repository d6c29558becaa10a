local out = {}
local gens = {}
local loaded = {}
for i = 1, #KEYS, 2 do
  local a = (i - 1) / 2 * 3
  local f, want = ARGV[a + 1], ARGV[a + 2]
  local g = gens[KEYS[i + 1]]
  if not g then
    g = redis.call('HGET', KEYS[i + 1], 'g') or "-1"
    gens[KEYS[i + 1]] = g
  end
  local l = loaded[KEYS[i]]
  if l == nil then
    l = redis.call('HEXISTS', KEYS[i], ':loaded') == 1
    loaded[KEYS[i]] = l
  end
  local c = redis.call('HGET', KEYS[i], f) or ""
  -- Never into a hash that is not loaded: one Redis lost, or one unloaded
  -- after a degraded write, whose fields are behind what was acknowledged
  -- though the expected value may still match them.
  if not l then
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
