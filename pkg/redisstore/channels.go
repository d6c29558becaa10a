package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/channel"
)

// The channel state beside the user hashes. Every key carries a
// hash tag, {channel}, so Redis Cluster keeps what one script touches in
// one slot:
//
//	hd:{channel}         string: the head, "SEQ MSG UPDATED_MS" (numbers
//	                     base 62; "0  0" = known to have none): a string,
//	                     so a user's heads read with one MGET (heads.go)
//
// A user's mentions are a kind's of their own (pkg/kinds/mentions), and
// so are the membership registers, per user and per channel
// (pkg/kinds/members).

const (
	// seqWidth is the width of a padded base-62 seq (padSeq).
	seqWidth = 11
	// MaxUnreadChannels bounds a user's default channel set in one
	// read of it (the unread view's, a kind's user hash read whole): the
	// Postgres fallback's bound (pgstore.MaxChannelsPerRead), so that
	// both stores answer the same users.
	MaxUnreadChannels = 10000
)

// ErrTooManyChannels is the answer of a read of a user's default channel
// set (or of a user hash read whole) larger than MaxUnreadChannels: read
// it from Postgres (which pages the first MaxUnreadChannels in channel
// order) or list the channels.
var ErrTooManyChannels = errors.New("more channels than one unread read covers")

// headScript raises a channel's head and keeps the message's id among
// the channel's newest. KEYS[1] = the channel value (heads.go), KEYS[2] =
// the message-id set; ARGV = seq, message id, time (numbers base 62),
// then the seq in decimal and how many ids to keep. Returns {changed, the
// channel value}.
var headScript = redis.NewScript(luaCommon + luaChannelValue + `
if ARGV[2] ~= "" and ARGV[4] ~= "0" then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[4] .. " " .. ARGV[2])
  local keep = tonumber(ARGV[5])
  if redis.call('ZCARD', KEYS[2]) > keep + keep / 10 then
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -keep - 1)
  end
end
local f = cvget(KEYS[1])
local ts = ARGV[3]
if f[1] ~= "-" then
  if cmp(ARGV[1], f[1]) <= 0 then return {0, table.concat(f, " ", 1, 5)} end
  if cmp(f[3], ts) > 0 then ts = f[3] end
end
f[1], f[2], f[3] = ARGV[1], ARGV[2], ts
return {1, cvset(KEYS[1], f)}
`)

var channelScripts = []*redis.Script{headScript}

func padSeq(seq int64) string {
	var buf [seqWidth]byte
	return string(appendPadded(buf[:0], seq))
}

// appendPadded appends padSeq(seq) to b without allocating for it.
func appendPadded(b []byte, seq int64) []byte {
	var digits [seqWidth]byte
	d := appendB62(digits[:0], seq)
	for range seqWidth - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

func parsePadded(s string) (int64, error) {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		t = "0"
	}
	return parseB62(t)
}

func encodeHead(h channel.Head) (string, error) {
	if h.Seq < 0 || h.UpdatedAtUnixMs < 0 || strings.IndexByte(h.MessageID, ' ') >= 0 {
		return "", fmt.Errorf("storing the head of %s in redis: not storable: %+v", h.Channel, h)
	}
	return string(appendB62(nil, h.Seq)) + " " + h.MessageID + " " + string(appendB62(nil, h.UpdatedAtUnixMs)), nil
}

func decodeHead(ch, v string) (channel.Head, error) {
	seq, msg, at, ok := parseHead(v)
	if !ok {
		return channel.Head{}, fmt.Errorf("decoding the redis head of %s: unexpected %q", ch, v)
	}
	return channel.Head{Channel: ch, Seq: seq, MessageID: msg, UpdatedAtUnixMs: at}, nil
}

// parseHead reads a head's value (a channel's or a thread's).
func parseHead(v string) (seq int64, msg string, at int64, ok bool) {
	var f [3]string
	if splitSpaces(v, f[:]) != len(f) {
		return 0, "", 0, false
	}
	seq, err1 := parseB62(f[0])
	at, err2 := parseB62(f[2])
	if err1 != nil || err2 != nil {
		return 0, "", 0, false
	}
	return seq, f[1], at, true
}

// ReadEach calls decode with each answer of cmds that Redis holds. An
// answer decode refuses is skipped and counted (SkipUndecodable): an
// undecodable stored field never fails a whole read (the sweep repairs it
// from Postgres).
func (s *Store) ReadEach(cmds []*redis.StringCmd, decode func(i int, v string) error) error {
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if decode(i, v) != nil {
			s.SkipUndecodable()
		}
	}
	return nil
}

// HeadResult is the outcome of one head raise.
type HeadResult struct {
	// Head is the channel's head after the raise.
	Head channel.Head
	// Advanced is true when the raise moved the head.
	Advanced bool
	Err      error
}

// RaiseHeads max-merges heads into their channels' head keys in one
// pipeline and returns the head after each.
func (s *Store) RaiseHeads(ctx context.Context, heads []channel.Head) ([]HeadResult, error) {
	out := make([]HeadResult, len(heads))
	cmds := make([]*redis.Cmd, len(heads))
	_, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, h := range heads {
			v, err := encodeHead(h)
			if err != nil {
				out[i].Err = err
				continue
			}
			f := strings.SplitN(v, " ", 3)
			cmds[i] = headScript.EvalSha(ctx, pipe, []string{s.HeadKey(h.Channel), s.MessageIDsKey(h.Channel)}, f[0], f[1], f[2], h.Seq, MessageIDsKept)
		}
	})
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		res, cerr := cmd.Slice()
		if cerr != nil {
			out[i].Err = fmt.Errorf("%w: raising the head of %s: %w", ErrUnavailable, heads[i].Channel, cerr)
			continue
		}
		changed, _ := res[0].(int64)
		v, _, _, _ := splitChannelValue(res[1])
		out[i].Head, out[i].Err = decodeHead(heads[i].Channel, v)
		out[i].Advanced = changed == 1
	}
	return out, err
}

// Heads returns the heads Redis knows of the listed channels: a channel
// known to have no head maps to a Head with Seq 0; a channel Redis knows
// nothing about is absent (read Postgres, then HydrateHeads).
func (s *Store) Heads(ctx context.Context, channels []string) (map[string]channel.Head, error) {
	var heads *ChannelValues
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		heads = s.QueueChannelValues(ctx, pipe, channels)
	}); err != nil {
		return nil, err
	}
	out := make(map[string]channel.Head, len(channels))
	for i, ch := range channels {
		v, ok, err := heads.Head(i)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if !ok {
			continue
		}
		if h, err := decodeHead(ch, v); err != nil {
			s.SkipUndecodable()
		} else {
			out[ch] = h
		}
	}
	return out, nil
}

// HydrateHeads max-merges durable heads, and records the channels of none
// (known to have no head yet) so that later reads need not ask Postgres
// again; a real head always beats that record.
func (s *Store) HydrateHeads(ctx context.Context, heads []channel.Head, none []string) error {
	all := append([]channel.Head(nil), heads...)
	for _, ch := range none {
		all = append(all, channel.Head{Channel: ch})
	}
	res, err := s.RaiseHeads(ctx, all)
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
