package redisstore

// What the inbox reads besides the counts: the order of a user's channels
// by activity, and the ids of the messages to jump to.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
)

// MessageIDsKept is how many of a channel's newest message ids Redis keeps
// (mi:{channel}, a sorted set: score the seq, member "SEQ ID"), trimmed
// when it holds a tenth more. They are kept in Redis only: after a loss, a
// channel's ids come back with its next messages.
const MessageIDsKept = 1000

// MessageIDsKey is a channel's newest message ids.
func (s *Store) MessageIDsKey(ch string) string { return s.prefix + "mi:{" + ch + "}" }

// MessageRef is a message of a channel by its seq.
type MessageRef struct {
	Channel string
	Seq     int64
}

// MessageIDs returns the id of each message Redis keeps ("" where it keeps
// none), in one pipeline.
func (s *Store) MessageIDs(ctx context.Context, refs []MessageRef) ([]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(refs))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, r := range refs {
			if r.Seq > 0 {
				q := strconv.FormatInt(r.Seq, 10)
				cmds[i] = pipe.ZRangeByScore(ctx, s.MessageIDsKey(r.Channel), &redis.ZRangeBy{Min: q, Max: q, Count: 1})
			}
		}
	}); err != nil {
		return nil, err
	}
	out := make([]string, len(refs))
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		ms, err := cmd.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: reading the message ids of %s: %w", ErrUnavailable, refs[i].Channel, err)
		}
		if len(ms) > 0 {
			_, out[i], _ = strings.Cut(ms[0], " ")
		}
	}
	return out, nil
}

// InboxOrder reads a user's default channel set (as UnreadPage does, in
// channel order) and the head of each of its channels, without counting:
// what the inbox sorts by. Two round trips: the channels of the user's
// cursor hash (fields only) with the membership registers, then one MGET
// of the heads. complete is false when Redis cannot answer alone (a user
// hash not hydrated, a head unknown or undecodable): read the counts,
// which hydrate, and ask again.
func (s *Store) InboxOrder(ctx context.Context, user string) (heads []channel.Head, complete bool, err error) {
	var fields *redis.StringSliceCmd
	var regsCmd *redis.KeyValueSliceCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		fields = pipe.HRandField(ctx, s.UserKey(user), userHashesCount)
		regsCmd = pipe.HRandFieldWithValues(ctx, s.UserMembersKey(user), userHashesCount)
	}); err != nil {
		return nil, false, fmt.Errorf("reading the channels of %s: %w", user, err)
	}
	fs, err := fields.Result()
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("%w: reading the channels of %s: %w", ErrUnavailable, user, err)
	case len(fs) >= userHashesCount:
		return nil, false, fmt.Errorf("%w: user %s has more than %d", ErrTooManyChannels, user, MaxUnreadChannels)
	}
	kvs := make([]redis.KeyValue, len(fs))
	for i, f := range fs {
		kvs[i].Key = f
	}
	cursors := newFieldTable(kvs)
	regs, err := userTable(user, regsCmd)
	if err != nil {
		return nil, false, err
	}
	channels, err := unionOf(user, cursors, regs)
	if err != nil {
		return nil, false, err
	}
	complete = cursors.loaded && regs.loaded
	channels, _ = s.pageOf(channels, regs, user, Page{})
	if len(channels) == 0 {
		return nil, complete, nil
	}
	var read *headsRead
	keys := s.headOnlyKeys(channels)
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		read = s.queueHeads(ctx, pipe, keys, false)
	}); err != nil {
		return nil, false, err
	}
	heads = make([]channel.Head, 0, len(channels))
	for i, ch := range channels {
		v, known, err := read.get(i)
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if !known {
			complete = false
			continue
		}
		h, err := decodeHead(ch, v)
		if err != nil {
			s.skipUndecodable()
			complete = false
			continue
		}
		heads = append(heads, h)
	}
	return heads, complete, nil
}
