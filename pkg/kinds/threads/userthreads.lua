local loaded = redis.call('HEXISTS', KEYS[1], ':loaded')
local n = redis.call('HLEN', KEYS[1]) - loaded - redis.call('HEXISTS', KEYS[1], ':collected')
if n > tonumber(ARGV[1]) then return {-1, n} end
local all = redis.call('HGETALL', KEYS[1])
local regs, chans, seen = {}, {}, {}
local p = ARGV[2]
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 1) ~= ":" and string.sub(f, 1, #p) == p then
    regs[#regs + 1] = f
    regs[#regs + 1] = all[i + 1]
    local ch = string.match(f, "^[^ ]+")
    if KEYS[2] and ch and not seen[ch] then
      seen[ch] = true
      chans[#chans + 1] = ch
    end
  end
end
if not KEYS[2] then return {loaded, regs} end
local members = {redis.call('HEXISTS', KEYS[2], ':loaded')}
-- HMGET in chunks: unpack is bounded by Lua's stack.
for i = 1, #chans, 1000 do
  local got = redis.call('HMGET', KEYS[2], unpack(chans, i, math.min(i + 999, #chans)))
  for j = 1, #got do members[#members + 1] = got[j] end
end
return {loaded, regs, chans, members}
