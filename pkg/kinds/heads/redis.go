package heads

// A channel's head, deletion count and group mention top are one string
// key, the channel value, so that those of a user's channels read with one
// MGET (one per cluster slot) of one key per channel: at a thousand
// channels a pipeline of HGETs cost Redis and the gateway about 2.5 times
// as much as one MGET, and an MGET of three keys per channel about 2 times
// as much as one of one (each key a lookup in the keyspace, mostly a cache
// miss). Every key carries the channel's hash tag:
//
//	hd:{channel}       string: `SEQ MSG UPDATED_MS DELETIONS GROUP_TOP`:
//	                   the head (numbers base 62; SEQ "-" when Redis does
//	                   not know it; "0  0" = known to have none), the size
//	                   of the channel's deletion set (pkg/kinds/deletions)
//	                   and its greatest group mention seq, padded
//	                   (pkg/kinds/groupmentions); "-" for either, or a
//	                   value of the head alone (older builds'), means not
//	                   known: read Postgres and hydrate. The scripts that
//	                   write one part keep the others (LuaChannelValue).
//	mi:{channel}       sorted set: the channel's newest message ids (score
//	                   the seq, member "SEQ ID"), for the inbox's jump
//	                   target; mi:{channel}:ROOT a thread's (its replies').

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

var (
	//go:embed channelvalue.lua
	luaChannelValue string
	//go:embed raise.lua
	luaRaise string

	// LuaChannelValue is the Lua functions cvget(key) and cvset(key,
	// parts) reading and writing a channel value (RedisKey) in a script:
	// its five parts, "-" where not known. A kind that keeps a part of it
	// (the deletion count, the fourth; the group mentions' top, the
	// fifth) starts its script with them.
	LuaChannelValue = luaChannelValue

	raiseScript = redis.NewScript(redisstore.LuaCommon + luaChannelValue + luaRaise)

	// Scripts are the kind's scripts, for redisstore.Store.Load.
	Scripts = []*redis.Script{raiseScript}
)

// MessageIDsKept is how many of a channel's (or a thread's) newest message
// ids Redis keeps, trimmed when it holds a tenth more. They are kept in
// Redis only: after a loss, the ids come back with the next messages.
const MessageIDsKept = 1000

// RedisKey is a channel's value (its head, deletion count and group
// mention top).
func (s Store) RedisKey(ch string) string { return s.redis.Prefix() + "hd:{" + ch + "}" }

// redisKeys is RedisKey of each channel, built in one allocation (at a
// thousand channels, a string each showed in profiles).
func redisKeys(prefix string, channels []string) []string {
	n := 0
	for _, ch := range channels {
		n += len(prefix) + len("hd:{}") + len(ch)
	}
	var b strings.Builder
	b.Grow(n)
	ends := make([]int, len(channels))
	for i, ch := range channels {
		b.WriteString(prefix)
		b.WriteString("hd:{")
		b.WriteString(ch)
		b.WriteByte('}')
		ends[i] = b.Len()
	}
	all := b.String()
	keys := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		keys[i], start = all[start:end], end
	}
	return keys
}

// MessageIDsKey is a channel's newest message ids.
func (s Store) MessageIDsKey(ch string) string { return s.redis.Prefix() + "mi:{" + ch + "}" }

// threadMessageIDsKey is a thread's newest reply ids, in its channel's
// slot.
func (s Store) threadMessageIDsKey(ref thread.Ref) string {
	return s.MessageIDsKey(ref.Channel) + ":" + strconv.FormatInt(ref.Root, 10)
}

// ScanRedis returns one SCAN page of the channels with a channel value and
// the cursor of the next page, for the drift sweep.
func (s Store) ScanRedis(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, "hd:", cur, count)
}

// ChannelValues is a queued read of channel values (heads, deletion
// counts and group mention tops). Its answers are read once the pipeline
// ran.
type ChannelValues struct{ get *redisstore.MGet }

// QueueChannelValues queues on pipe the read of the channel values of
// channels (the unread and inbox reads' heads, with the read of a user's
// hashes).
func (s Store) QueueChannelValues(ctx context.Context, pipe redis.Pipeliner, channels []string) *ChannelValues {
	return &ChannelValues{get: s.redis.QueueMGet(ctx, pipe, redisKeys(s.redis.Prefix(), channels))}
}

// QueueHead queues on pipe the read of one channel's value, for a caller
// that reads it with other commands (SplitChannelValue reads the answer).
func (s Store) QueueHead(ctx context.Context, pipe redis.Pipeliner, ch string) *redis.StringCmd {
	return pipe.Get(ctx, s.RedisKey(ch))
}

// Head returns channel i's head (`SEQ MSG UPDATED_MS`:
// redisstore.DecodeHead), and false when Redis does not know it.
func (r *ChannelValues) Head(i int) (string, bool, error) {
	v, err := r.get.Value(i)
	head, known, _, _ := SplitChannelValue(v)
	return head, known, err
}

// Deletions returns channel i's deletion count ("": unknown; read after
// Head, which reports the read's error).
func (r *ChannelValues) Deletions(i int) string {
	v, _ := r.get.Value(i)
	_, _, dn, _ := SplitChannelValue(v)
	return dn
}

// Tops returns the group mention top (padded) of each of the first n
// channels ("": unknown).
func (r *ChannelValues) Tops(n int) []string {
	out := make([]string, n)
	for i := range out {
		v, _ := r.get.Value(i)
		_, _, _, out[i] = SplitChannelValue(v)
	}
	return out
}

// unknownPart marks a part of a channel value Redis does not know.
const unknownPart = "-"

// SplitChannelValue splits a channel value (nil: no key) into its head,
// deletion count and group mention top; known is false, and the others
// "", where Redis does not know them.
func SplitChannelValue(v any) (head string, known bool, deletions, top string) {
	s, ok := v.(string)
	if !ok || s == "" {
		return "", false, "", ""
	}
	// The head's three fields, then the two parts (or none: an older
	// build's value).
	end, spaces := len(s), 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if spaces++; spaces == 3 {
				end = i
				break
			}
		}
	}
	head, rest := s[:end], ""
	if end < len(s) {
		rest = s[end+1:]
	}
	known = !strings.HasPrefix(head, unknownPart+" ")
	if !known {
		head = ""
	}
	if d, t, ok := strings.Cut(rest, " "); ok {
		if d != unknownPart {
			deletions = d
		}
		if t != unknownPart {
			top = t
		}
	}
	return head, known, deletions, top
}

// Result is the outcome of one head raise.
type Result struct {
	// Head is the channel's head after the raise.
	Head channel.Head
	// Advanced is true when the raise moved the head.
	Advanced bool
	Err      error
}

// RaiseRedis max-merges heads into their channels' values in one pipeline
// and returns the head after each.
func (s Store) RaiseRedis(ctx context.Context, heads []channel.Head) ([]Result, error) {
	out := make([]Result, len(heads))
	cmds := make([]*redis.Cmd, len(heads))
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, h := range heads {
			v, err := redisstore.EncodeHead(h)
			if err != nil {
				out[i].Err = err
				continue
			}
			f := strings.SplitN(v, " ", 3)
			cmds[i] = raiseScript.EvalSha(ctx, pipe, []string{s.RedisKey(h.Channel), s.MessageIDsKey(h.Channel)}, f[0], f[1], f[2], h.Seq, MessageIDsKept)
		}
	}, Scripts...)
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		res, cerr := cmd.Slice()
		if cerr != nil {
			out[i].Err = fmt.Errorf("%w: raising the head of %s: %w", redisstore.ErrUnavailable, heads[i].Channel, cerr)
			continue
		}
		changed, _ := res[0].(int64)
		v, _, _, _ := SplitChannelValue(res[1])
		out[i].Head, out[i].Err = redisstore.DecodeHead(heads[i].Channel, v)
		out[i].Advanced = changed == 1
	}
	return out, err
}

// ReadRedis returns the heads Redis knows of the listed channels: a
// channel known to have no head maps to a Head with Seq 0; a channel Redis
// knows nothing about is absent (read Postgres, then HydrateRedis).
func (s Store) ReadRedis(ctx context.Context, channels []string) (map[string]channel.Head, error) {
	var heads *ChannelValues
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		heads = s.QueueChannelValues(ctx, pipe, channels)
	}); err != nil {
		return nil, err
	}
	out := make(map[string]channel.Head, len(channels))
	for i, ch := range channels {
		v, ok, err := heads.Head(i)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		if !ok {
			continue
		}
		if h, err := redisstore.DecodeHead(ch, v); err != nil {
			s.redis.SkipUndecodable()
		} else {
			out[ch] = h
		}
	}
	return out, nil
}

// HydrateRedis max-merges durable heads, and records the channels of none
// (known to have no head yet) so that later reads need not ask Postgres
// again; a real head always beats that record.
func (s Store) HydrateRedis(ctx context.Context, heads []channel.Head, none []string) error {
	all := append([]channel.Head(nil), heads...)
	for _, ch := range none {
		all = append(all, channel.Head{Channel: ch})
	}
	res, err := s.RaiseRedis(ctx, all)
	if err != nil {
		return fmt.Errorf("hydrating heads: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("hydrating heads: %w", r.Err)
		}
	}
	return nil
}

// MessageRef is a message of a channel (Root 0) or a reply of one of its
// threads, by its seq.
type MessageRef struct {
	Channel string
	Root    int64
	Seq     int64
}

func (s Store) messageIDsKeyOf(r MessageRef) string {
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
func (s Store) RememberReplyIDs(ctx context.Context, heads []thread.Head) error {
	kept := slices.DeleteFunc(slices.Clone(heads), func(h thread.Head) bool { return h.MessageID == "" || h.Seq <= 0 })
	if len(kept) == 0 {
		return nil
	}
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for _, h := range kept {
			k := s.threadMessageIDsKey(h.Ref)
			seq := strconv.FormatInt(h.Seq, 10)
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(h.Seq), Member: seq + " " + h.MessageID})
			pipe.ZRemRangeByRank(ctx, k, 0, -MessageIDsKept-1)
		}
	})
	if err != nil {
		return fmt.Errorf("%w: keeping the reply ids of %d threads: %w", redisstore.ErrUnavailable, len(kept), err)
	}
	return nil
}

// MessageIDs returns the id of each message Redis keeps ("" where it keeps
// none), in one pipeline.
func (s Store) MessageIDs(ctx context.Context, refs []MessageRef) ([]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(refs))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
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
			return nil, fmt.Errorf("%w: reading the message ids of %s: %w", redisstore.ErrUnavailable, refs[i].Channel, err)
		}
		if len(ms) > 0 {
			_, out[i], _ = strings.Cut(ms[0], " ")
		}
	}
	return out, nil
}
