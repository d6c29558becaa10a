-- Cleans an erased user out of a channel's view: their cursors and
-- sorted-set entries, and their moves in the view's stream (bounded by
-- its MAXLEN, so the walk is too); then, for each side the view showed, a
-- removal entry (u, k, rm "1", t: no position) so that live watchers stop
-- showing the user — it names the user until the stream's MAXLEN trims
-- it. KEYS = cur, r, d, stream; ARGV[1] = the user, ARGV[2] = the
-- erasure's time (Unix ms).
local u = ARGV[1]
local had = {}
for _, k in ipairs({'r', 'd'}) do
  if redis.call('HDEL', KEYS[1], k .. ':' .. u) == 1 then had[#had+1] = k end
end
redis.call('ZREM', KEYS[2], u)
redis.call('ZREM', KEYS[3], u)
local start = '-'
while true do
  local page = redis.call('XRANGE', KEYS[4], start, '+', 'COUNT', 1000)
  if #page == 0 then break end
  for _, e in ipairs(page) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'u' and f[i+1] == u then redis.call('XDEL', KEYS[4], e[1]) break end
    end
  end
  if #page < 1000 then break end
  start = '(' .. page[#page][1]
end
for _, k in ipairs(had) do
  redis.call('XADD', KEYS[4], '*', 'u', u, 'k', k, 'rm', '1', 't', ARGV[2])
end
return 1
