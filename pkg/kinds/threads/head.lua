local out = {}
for i = 1, #ARGV, 4 do
  local field, seq, msg, at = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3]
  local cur = redis.call('HGET', KEYS[1], field)
  local s, m, t
  if cur then s, m, t = string.match(cur, '^(%w+) (%S*) (%w+)$') end
  local adv, v = 0, cur
  if s and cmp(seq, s) <= 0 then
    if cmp(at, t) > 0 then v = s .. ' ' .. m .. ' ' .. at end
  else
    if t and cmp(t, at) > 0 then at = t end
    adv, v = 1, seq .. ' ' .. msg .. ' ' .. at
  end
  if v ~= cur then redis.call('HSET', KEYS[1], field, v) end
  out[#out+1] = adv out[#out+1] = v
end
return out
