-- An erasure's redaction of a user as a sender in a channel's group
-- mentions: KEYS[1] = the set, ARGV[1] = the user. The user's group
-- mentions keep their seq with no sender (the least sender: stores that
-- still name the user converge to it).
local u = ARGV[1]
-- a member is the seq (11 characters) then the sender
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, 12) == u then
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZADD', KEYS[1], 0, string.sub(m, 1, 11))
  end
end
return 1
