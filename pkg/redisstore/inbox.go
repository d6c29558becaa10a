package redisstore

// The ids of the messages the inbox jumps to: a cache the head writes
// (RaiseHeads) and the thread kind's raises (RememberReplyIDs) keep, and
// the inbox reads (MessageIDs).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

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

// RememberReplyIDs keeps the reply ids of thread heads (those with one) in
// their threads' sets, trimmed to the newest MessageIDsKept, in one
// pipeline, for the inbox's first unread id (MessageIDs): the thread kind
// calls it after a raise. The sets are a cache of ids, not state: the
// order of writes does not matter.
func (s *Store) RememberReplyIDs(ctx context.Context, heads []thread.Head) error {
	kept := slices.DeleteFunc(slices.Clone(heads), func(h thread.Head) bool { return h.MessageID == "" || h.Seq <= 0 })
	if len(kept) == 0 {
		return nil
	}
	_, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
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
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
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
