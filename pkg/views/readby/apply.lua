-- Applies a channel's moves: those of members, and while the membership
-- hash is not complete (never hydrated, or lost with Redis) those of
-- users it holds no register of, who may be members. A user who left, or
-- who has no register in a complete hash, is never shown (read-by and
-- ticks list members only), so their moves would only cost a write.
-- KEYS = cur, r, d, stream, cm;
-- ARGV[1] = the stream's MAXLEN ("0": do not append, for rebuilds), then
-- user, side, epoch, seq, at per move (decimal, no leading zeros, so the
-- longer numeral is the greater and equal lengths compare bytewise; digits
-- only, so the byte order is the same in every locale). Returns one stream
-- id per move ("" when the move changed nothing, "-" when it was not
-- streamed).
local out = {}
local complete = redis.call('HEXISTS', KEYS[5], ':loaded') == 1
if complete and redis.call('HLEN', KEYS[5]) == 1 + redis.call('HEXISTS', KEYS[5], ':n') then
  -- no registers: an untracked channel, whose view stays empty
  for i = 2, #ARGV, 5 do out[#out+1] = "" end
  return out
end
for i = 2, #ARGV, 5 do
  local u, k, e, s, t = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4]
  local id = ""
  local reg = redis.call('HGET', KEYS[5], u)
  if (reg and string.sub(reg, 1, 1) == "1") or (not reg and not complete) then
    local f = k .. ":" .. u
    local cur = redis.call('HGET', KEYS[1], f)
    local adv = true
    if cur then
      local a = string.find(cur, ":", 1, true)
      local b = string.find(cur, ":", a + 1, true)
      -- by (seq, epoch), as the public read merges (receipt.Merge);
      -- delivered's epoch is always 0
      local c = cmp(s, string.sub(cur, a + 1, b - 1))
      if c == 0 then c = cmp(e, string.sub(cur, 1, a - 1)) end
      adv = c > 0
    end
    if adv then
      redis.call('HSET', KEYS[1], f, e .. ":" .. s .. ":" .. t)
      local z = KEYS[2]
      if k == "d" then z = KEYS[3] end
      redis.call('ZADD', z, s, u)
      if ARGV[1] ~= "0" then
        id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[1], '*', 'u', u, 'k', k, 'e', e, 's', s, 't', t)
      else
        id = "-"
      end
    end
  end
  out[#out+1] = id
end
return out
