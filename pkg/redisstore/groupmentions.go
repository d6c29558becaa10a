package redisstore

// A channel's group mentions (channel.GroupMentions): a sorted set per
// channel, gm:{channel}. Every member has score 0 and is the padded seq
// followed by the sender, so the set's order is seq order (padded seqs
// sort as numbers) and a seq's members sort by sender. The channel value
// (heads.go) holds the greatest kept seq (padded) as its fifth part, read
// with the heads: a channel whose top is at or below a user's read costs
// the unread read nothing more, and an unknown top means "not known"
// (hydrate from Postgres).

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
)

// GroupMentionsKey is the key of a channel's group mentions.
func (s *Store) GroupMentionsKey(ch string) string { return s.prefix + "gm:{" + ch + "}" }

// groupMentionScript merges members into a channel's group mentions and
// keeps the newest cap+1 seqs. KEYS[1] = the set, KEYS[2] = the channel
// value (its top is the fifth part);
// ARGV[1] = cap+1, ARGV[2] = "h" to hydrate (the top then becomes known)
// or "w" (a write raises the top only where it is known: an unknown top
// still needs Postgres' older ones), then the
// members. Of one seq's members the least (bytes) is kept, as
// channel.MergeGroupMentions keeps the least sender. Returns the set's
// size.
var groupMentionScript = redis.NewScript(luaChannelValue + `
local function less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
for i = 3, #ARGV do
  local m = ARGV[i]
  local p = string.sub(m, 1, 11)
  local same = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. p, '[' .. p .. '\255')
  local least = m
  for _, o in ipairs(same) do if less(o, least) then least = o end end
  for _, o in ipairs(same) do if o ~= least then redis.call('ZREM', KEYS[1], o) end end
  if least == m then redis.call('ZADD', KEYS[1], 0, m) end
end
local n = redis.call('ZCARD', KEYS[1])
local over = n - tonumber(ARGV[1])
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1) n = n - over end
local top = '00000000000'
if n > 0 then top = string.sub(redis.call('ZRANGE', KEYS[1], -1, -1)[1], 1, 11) end
local f = cvget(KEYS[2])
local cur = f[5] ~= '-' and f[5]
if cur or ARGV[2] == 'h' then
  if cur and less(top, cur) then top = cur end
  f[5] = top
  cvset(KEYS[2], f)
end
return n
`)

// AddGroupMentions merges group mentions into Redis, each channel's kept
// to its newest cap+1, in one pipeline.
func (s *Store) AddGroupMentions(ctx context.Context, gms []channel.GroupMentions, mentionCap int) error {
	return s.mergeGroupMentions(ctx, gms, mentionCap, "w")
}

// HydrateGroupMentions merges Postgres' group mentions of channels into
// Redis and marks the channels known (an entry without mentions records
// that the channel has none).
func (s *Store) HydrateGroupMentions(ctx context.Context, gms []channel.GroupMentions, mentionCap int) error {
	return s.mergeGroupMentions(ctx, gms, mentionCap, "h")
}

func (s *Store) mergeGroupMentions(ctx context.Context, gms []channel.GroupMentions, mentionCap int, mode string) error {
	cmds := make([]*redis.Cmd, 0, len(gms))
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for _, g := range gms {
			if len(g.Mentions) == 0 && mode != "h" {
				continue
			}
			argv := make([]any, 0, 2+len(g.Mentions))
			argv = append(argv, mentionCap+1, mode)
			for _, m := range g.Mentions {
				argv = append(argv, padSeq(m.Seq)+m.Sender)
			}
			cmds = append(cmds, groupMentionScript.EvalSha(ctx, pipe, []string{s.GroupMentionsKey(g.Channel), s.HeadKey(g.Channel)}, argv...))
		}
	})
	if err == nil {
		for _, c := range cmds {
			if err = c.Err(); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: merging group mentions: %w", ErrUnavailable, err)
	}
	return nil
}

// GroupMentions returns each channel's kept group mentions, ascending
// (nil: Redis holds no set for it).
func (s *Store) GroupMentions(ctx context.Context, channels []string) ([]*channel.GroupMentions, error) {
	cmds := make([]*redis.StringSliceCmd, len(channels))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, ch := range channels {
			cmds[i] = pipe.ZRange(ctx, s.GroupMentionsKey(ch), 0, -1)
		}
	}); err != nil {
		return nil, err
	}
	out := make([]*channel.GroupMentions, len(channels))
	for i, c := range cmds {
		ms, err := c.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading group mentions: %w", ErrUnavailable, err)
		}
		if len(ms) == 0 {
			continue
		}
		g := &channel.GroupMentions{Channel: channels[i]}
		for _, m := range ms {
			gm, err := decodeGroupMember(m)
			if err != nil {
				s.skipUndecodable()
				continue
			}
			g.Mentions = append(g.Mentions, gm)
		}
		out[i] = g
	}
	return out, nil
}

// ScanGroupMentionChannels returns one SCAN page of the channels with a
// group mention set and the cursor of the next page.
func (s *Store) ScanGroupMentionChannels(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, "gm:", cur, count)
	return onlyWhole(ids, rests), next, err
}

func decodeGroupMember(m string) (channel.GroupMention, error) {
	if len(m) < seqWidth {
		return channel.GroupMention{}, fmt.Errorf("decoding a redis group mention: %q", m)
	}
	q, err := parsePadded(m[:seqWidth])
	if err != nil {
		return channel.GroupMention{}, fmt.Errorf("decoding a redis group mention: %q: %w", m, err)
	}
	return channel.GroupMention{Seq: q, Sender: m[seqWidth:]}, nil
}

// countGroupMentions gives the views that have group mentions above
// their read (a second read, of those channels' sets only) the mention
// count with them (ChannelView.MentionsAt); mentions is the user's
// mention table (explicit mentions, to count each message once). The
// channels whose group mentions Redis does not know go to
// view.MissingGroupMentions. tops are the tops of channels (ascending; the
// views are some of them, in the same order).
func (s *Store) countGroupMentions(ctx context.Context, view *UnreadView, channels []string, tops []string,
	mentions fieldTable, mentionCap int,
) error {
	var idx []int
	var bound [seqWidth]byte
	j := 0
	for i := range view.Channels {
		v := &view.Channels[i]
		for channels[j] != v.Channel {
			j++
		}
		top := tops[j]
		switch {
		case top == "":
			view.MissingGroupMentions = append(view.MissingGroupMentions, v.Channel)
		case v.HasMembership && !v.Membership.Member:
			// A group mention mentions members (a channel that tracks none
			// counts everyone).
		case v.Unread > 0 && top > string(appendPadded(bound[:0], v.State.EffectiveRead().Seq)):
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	cmds := make([]*redis.StringSliceCmd, len(idx))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for j, i := range idx {
			v := &view.Channels[i]
			from := "[" + padSeq(v.State.EffectiveRead().Seq+1)
			cmds[j] = pipe.ZRangeByLex(ctx, s.GroupMentionsKey(v.Channel), &redis.ZRangeBy{Min: from, Max: "+"})
		}
	}); err != nil {
		return err
	}
	for j, i := range idx {
		v := &view.Channels[i]
		ms, err := cmds[j].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("%w: reading group mentions: %w", ErrUnavailable, err)
		}
		if len(ms) == 0 {
			// The field says there are some above the read: the set is lost.
			view.MissingGroupMentions = append(view.MissingGroupMentions, v.Channel)
			continue
		}
		var group []int64
		for _, m := range ms {
			gm, err := decodeGroupMember(m)
			if err != nil {
				s.skipUndecodable()
				continue
			}
			if gm.Sender != view.User {
				group = append(group, gm.Seq)
			}
		}
		t := mentions.from(v.Channel)
		var kept []int64
		if raw, ok := t.next(v.Channel); ok {
			if kept, err = decodeMentions(v.State.Key, raw); err != nil {
				s.skipUndecodable()
				kept = nil
			}
		}
		v.groupMentions, v.groupMentionsCapped = channel.MentionCountWithGroup(kept, group, v.State.EffectiveRead().Seq, mentionCap)
		v.hasGroupMentions, v.groupSeqs = true, group
	}
	return nil
}

// MentionsAt is the view's mention count and whether it is capped, with
// the channel's group mentions when withGroup (the user's level is all
// or mentions) and without them otherwise.
func (v *ChannelView) MentionsAt(withGroup bool) (int64, bool) {
	if withGroup && v.hasGroupMentions {
		return v.groupMentions, v.groupMentionsCapped
	}
	return v.Mentions, v.MentionsCapped
}

// SetGroupMentions sets the view's count with group mentions (a count
// made from Postgres).
func (v *ChannelView) SetGroupMentions(count int64, capped bool) {
	v.groupMentions, v.groupMentionsCapped, v.hasGroupMentions = count, capped, true
}
