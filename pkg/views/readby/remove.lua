-- Takes users' cursors of some sides out of a channel's view and streams
-- one removal entry (u user, k side, rm "1", t at) per cursor it took
-- out, so that live watchers stop showing it. KEYS = cur, r, d, stream;
-- ARGV[1] = at (Unix ms), ARGV[2] = the sides ("r", "d" or "rd"), then the
-- users. The entry is appended without MAXLEN: removals are rare, and the
-- next move's XADD trims the stream. Returns the number of entries
-- appended.
local n = 0
for i = 3, #ARGV do
  local u = ARGV[i]
  for k in string.gmatch(ARGV[2], '[rd]') do
    local z = KEYS[2]
    if k == 'd' then z = KEYS[3] end
    redis.call('ZREM', z, u)
    if redis.call('HDEL', KEYS[1], k .. ':' .. u) == 1 then
      redis.call('XADD', KEYS[4], '*', 'u', u, 'k', k, 'rm', '1', 't', ARGV[1])
      n = n + 1
    end
  end
end
return n
