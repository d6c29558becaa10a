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
}

// InboxOrder reads a user's default channel set (as UnreadPage does, in
// channel order) and the head of each of its channels, without counting.
// Two round trips: the channels of the user's cursor and membership
// hashes (fields only), the hash's count of left registers and the
// riders (the thread probe; channels nil: not known yet); then one MGET
// of the heads, with the registers' values only when the user may have
// left a channel (the count is not 0) to leave those out. The values were a third of the strings the inbox read, to find
// channels most users never left.
func (s *Store) InboxOrder(ctx context.Context, user string, riders ...Rider) (Inbox, error) {
	var fields, regFields *redis.StringSliceCmd
	var leftCount *redis.StringCmd
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		fields = pipe.HRandField(ctx, s.UserKey(user), userHashesCount)
		regFields = pipe.HRandField(ctx, s.UserMembersKey(user), userHashesCount)
		leftCount = pipe.HGet(ctx, s.UserMembersKey(user), leftCountField)
		queueRiders(ctx, pipe, riders, user, nil)
	}); err != nil {
		return Inbox{}, fmt.Errorf("reading the channels of %s: %w", user, err)
	}
	cursors, err := keysTable(user, fields)
	if err != nil {
		return Inbox{}, err
	}
	regs, err := keysTable(user, regFields)
	if err != nil {
		return Inbox{}, err
	}
	channels, err := unionOf(user, cursors, regs)
	if err != nil {
		return Inbox{}, err
	}
	out := Inbox{Complete: cursors.loaded && regs.loaded}
	if len(channels) == 0 {
		return out, nil
	}
	var read *headsRead
	var regValues *redis.SliceCmd
	keys := s.headKeys(channels)
	mayHaveLeft := leftCount.Val() != "0"
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		read = s.queueHeads(ctx, pipe, keys)
		if mayHaveLeft && len(regs.entries) > 0 {
			regValues = pipe.HMGet(ctx, s.UserMembersKey(user), regKeys(regs)...)
		}
	}); err != nil {
		return Inbox{}, err
	}
	kept := channels
	if regValues != nil {
		vals, err := regValues.Result()
		if err != nil {
			return Inbox{}, fmt.Errorf("%w: reading the memberships of %s: %w", ErrUnavailable, user, err)
		}
		for i, v := range vals {
			regs.entries[i].Value, _ = v.(string) // gone meanwhile (erased): no register
		}
		kept, _ = s.pageOf(slices.Clone(channels), regs, user, Page{})
	}
	out.Heads = make([]channel.Head, 0, len(kept))
	k := 0
	for i, ch := range channels {
		if k == len(kept) || kept[k] != ch {
			continue // left
		}
		k++
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

// keysTable is a user hash's fields (an HRANDFIELD without values) as a
// table without values.
func keysTable(user string, cmd *redis.StringSliceCmd) (fieldTable, error) {
	fs, err := cmd.Result()
	if err := userHashErr(user, len(fs), err); err != nil {
		return fieldTable{}, err
	}
	kvs := make([]redis.KeyValue, len(fs))
	for i, f := range fs {
		kvs[i].Key = f
	}
	return newFieldTable(kvs), nil
}

// regKeys is a table's fields, in its order.
func regKeys(t fieldTable) []string {
	out := make([]string, len(t.entries))
	for i, kv := range t.entries {
		out[i] = kv.Key
	}
	return out
}
