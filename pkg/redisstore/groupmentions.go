package redisstore

// The unread view's read of a channel's group mentions: the set
// gm:{channel} of the group mention kind (pkg/kinds/groupmentions, which
// owns its layout, writes and hydrates it), read here above each view's
// read, after the heads bring the channel's top (the channel value's
// fifth part). It moves out with the views.

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
)

// groupMentionsKey is the key of a channel's group mentions: the kind's
// (groupmentions.Store.RedisKey), which the view reads.
func (s *Store) groupMentionsKey(ch string) string { return s.prefix + "gm:{" + ch + "}" }

// decodeGroupMember reads a member of the set (the kind's codec).
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
			cmds[j] = pipe.ZRangeByLex(ctx, s.groupMentionsKey(v.Channel), &redis.ZRangeBy{Min: from, Max: "+"})
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
			if kept, err = ParseSeqList(raw); err != nil {
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
