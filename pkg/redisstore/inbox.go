package redisstore

// What the inbox reads besides the counts: the order of a user's channels
// by activity, and the ids of the messages to jump to.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/thread"
)

// MessageIDsKept is how many of a channel's (or a thread's) newest message
// ids Redis keeps (mi:{channel}, mi:{channel}:ROOT: a sorted set, score
// the seq, member "SEQ ID"), trimmed when it holds a tenth more. They are
// kept in Redis only: after a loss, the ids come back with the next
// messages.
const MessageIDsKept = 1000

// MessageIDsKey is a channel's newest message ids.
func (s *Store) MessageIDsKey(ch string) string { return s.prefix + "mi:{" + ch + "}" }

// threadMessageIDsKey is a thread's newest reply ids, in its channel's
// slot.
func (s *Store) threadMessageIDsKey(ref thread.Ref) string {
	return s.MessageIDsKey(ref.Channel) + ":" + strconv.FormatInt(ref.Root, 10)
}

// MessageRef is a message of a channel (Root 0) or a reply of one of its
// threads, by its seq.
type MessageRef struct {
	Channel string
	Root    int64
	Seq     int64
}

func (s *Store) messageIDsKeyOf(r MessageRef) string {
	if r.Root != 0 {
		return s.threadMessageIDsKey(thread.Ref{Channel: r.Channel, Root: r.Root})
	}
	return s.MessageIDsKey(r.Channel)
}

// rememberReplyIDs keeps the reply ids of thread heads (those with one) in
// their threads' sets, trimmed to the newest MessageIDsKept, in one
// pipeline. The sets are a cache of ids, not state: the order of writes
// does not matter.
func (s *Store) rememberReplyIDs(ctx context.Context, heads []thread.Head) error {
	kept := slices.DeleteFunc(slices.Clone(heads), func(h thread.Head) bool { return h.MessageID == "" || h.Seq <= 0 })
	if len(kept) == 0 {
		return nil
	}
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for _, h := range kept {
			k := s.threadMessageIDsKey(h.Ref)
			seq := strconv.FormatInt(h.Seq, 10)
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(h.Seq), Member: seq + " " + h.MessageID})
			pipe.ZRemRangeByRank(ctx, k, 0, -MessageIDsKept-1)
		}
	})
	if err != nil {
		return fmt.Errorf("%w: keeping the reply ids of %d threads: %w", ErrUnavailable, len(kept), err)
	}
	return nil
}

// MessageIDs returns the id of each message Redis keeps ("" where it keeps
// none), in one pipeline.
func (s *Store) MessageIDs(ctx context.Context, refs []MessageRef) ([]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(refs))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, r := range refs {
			if r.Seq > 0 {
				q := strconv.FormatInt(r.Seq, 10)
				cmds[i] = pipe.ZRangeByScore(ctx, s.messageIDsKeyOf(r), &redis.ZRangeBy{Min: q, Max: q, Count: 1})
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

// Inbox is what the inbox sorts by: a user's channels with their heads.
type Inbox struct {
	// Heads are the heads of the user's default channel set, in channel
	// order.
	Heads []channel.Head
	// Complete is false when Redis cannot answer alone (a user hash not
	// hydrated, a head unknown or undecodable): read the counts, which
	// hydrate, and ask again.
	Complete bool
	// ThreadsNone: the user's thread hash is hydrated and holds no
	// register, so there are no thread lines to read.
	ThreadsNone bool
}

// InboxOrder reads a user's default channel set (as UnreadPage does, in
// channel order) and the head of each of its channels, without counting.
// Two round trips: the channels of the user's cursor hash (fields only)
// with the membership registers and the thread probe, then one MGET of
// the heads.
func (s *Store) InboxOrder(ctx context.Context, user string) (Inbox, error) {
	var fields *redis.StringSliceCmd
	var regsCmd *redis.KeyValueSliceCmd
	var probe threadProbe
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		fields = pipe.HRandField(ctx, s.UserKey(user), userHashesCount)
		regsCmd = pipe.HRandFieldWithValues(ctx, s.UserMembersKey(user), userHashesCount)
		probe = s.queueThreadProbe(ctx, pipe, user)
	}); err != nil {
		return Inbox{}, fmt.Errorf("reading the channels of %s: %w", user, err)
	}
	fs, err := fields.Result()
	switch {
	case err != nil:
		return Inbox{}, fmt.Errorf("%w: reading the channels of %s: %w", ErrUnavailable, user, err)
	case len(fs) >= userHashesCount:
		return Inbox{}, fmt.Errorf("%w: user %s has more than %d", ErrTooManyChannels, user, MaxUnreadChannels)
	}
	out := Inbox{ThreadsNone: probe.none()}
	kvs := make([]redis.KeyValue, len(fs))
	for i, f := range fs {
		kvs[i].Key = f
	}
	cursors := newFieldTable(kvs)
	regs, err := userTable(user, regsCmd)
	if err != nil {
		return Inbox{}, err
	}
	channels, err := unionOf(user, cursors, regs)
	if err != nil {
		return Inbox{}, err
	}
	out.Complete = cursors.loaded && regs.loaded
	channels, _ = s.pageOf(channels, regs, user, Page{})
	if len(channels) == 0 {
		return out, nil
	}
	var read *headsRead
	keys := s.headKeys(channels)
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		read = s.queueHeads(ctx, pipe, keys)
	}); err != nil {
		return Inbox{}, err
	}
	out.Heads = make([]channel.Head, 0, len(channels))
	for i, ch := range channels {
		v, known, err := read.get(i)
		if err != nil {
			return Inbox{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if !known {
			out.Complete = false
			continue
		}
		h, err := decodeHead(ch, v)
		if err != nil {
			s.skipUndecodable()
			out.Complete = false
			continue
		}
		out.Heads = append(out.Heads, h)
	}
	return out, nil
}
