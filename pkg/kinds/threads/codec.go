package threads

import (
	"errors"
	"fmt"
	"strings"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The stored values of the kinds (redis.go has the keys).
//
// A thread head, field base62(root) of th:{channel}: "SEQ MSG UPDATED_MS",
// the channel head's layout (redisstore.EncodeHead).
//
// A user's register in a thread, field "CHANNEL SP base62(root)" of
// tu:{user} (ids never contain a space): up to three parts separated by one
// space, each omitted when empty,
//
//	[FOLLOW] [MENTIONS] [CURSORS]
//
// FOLLOW is "+" (following) or "-" (not) and the follow version (Unix ms),
// omitted for the zero register (not following, version 0). MENTIONS is
// "@" and the kept mention seqs, ascending, separated by ",". CURSORS are
// the thread cursors exactly as a channel's compact value (redisstore.AppendCursors: 4 to 7
// fields, the private read without its message id), omitted when no cursor
// has a position. Every number is base 62 (redisstore.AppendB62). The cursors come
// last because their fields are told apart by count and message ids may
// start with any printable character: the parts before them start with
// '+', '-' or '@', which a position (the cursors' first field) never does.
//
// For example "+VbmAx6e 2ZI m9876 d1 VbmAx6e" follows since
// 1,795,416,092,504 ms and has read up to seq 9876 (message "m9876"); it
// is 29 bytes, the common followed thread. "-VbmAx6e @2Z,2ZK" unfollowed,
// never read, two mentions. The empty value is never stored.

// threadField is the field of ref in its user's thread hash.
func threadField(ref thread.Ref) string {
	return string(redisstore.AppendB62(append([]byte(ref.Channel), ' '), ref.Root))
}

// parseThreadField inverts threadField.
func parseThreadField(f string) (thread.Ref, error) {
	ch, root, ok := strings.Cut(f, " ")
	if !ok || ch == "" {
		return thread.Ref{}, fmt.Errorf("unexpected thread field %q", f)
	}
	r, err := redisstore.ParseB62(root)
	if err != nil {
		return thread.Ref{}, fmt.Errorf("unexpected thread field %q: %w", f, err)
	}
	return thread.Ref{Channel: ch, Root: r}, nil
}

// rootField is the field of ref in its channel's thread head hash.
func rootField(ref thread.Ref) string { return string(redisstore.AppendB62(nil, ref.Root)) }

func encodeThreadHead(h thread.Head) (string, error) {
	return redisstore.EncodeHead(channel.Head{Channel: h.Ref.String(), Seq: h.Seq, MessageID: h.MessageID, UpdatedAtUnixMs: h.UpdatedAtUnixMs})
}

// decodeThreadHead names ref only in its error: a list of a user's
// threads decodes a head per thread.
func decodeThreadHead(ref thread.Ref, v string) (thread.Head, error) {
	seq, msg, at, ok := redisstore.ParseHead(v)
	if !ok {
		return thread.Head{}, fmt.Errorf("decoding the redis head of %s: unexpected %q", ref, v)
	}
	return thread.Head{Ref: ref, Seq: seq, MessageID: msg, UpdatedAtUnixMs: at}, nil
}

// threadStorable refuses what the layout cannot hold: negative numbers
// (EpochCurrent included: thread registers are merged resolved) and ids
// with a space.
func threadStorable(st thread.State) error {
	if st.Follow.VersionUnixMs < 0 {
		return fmt.Errorf("storing the thread register of %s/%s in redis: negative follow version %d", st.Key.User, st.Key.Ref, st.Follow.VersionUnixMs)
	}
	for _, m := range st.Mentions {
		if m < 0 {
			return fmt.Errorf("storing the thread register of %s/%s in redis: negative mention seq %d", st.Key.User, st.Key.Ref, m)
		}
	}
	c := st.Cursors
	c.Key = st.Key.ChannelKey()
	return cursors.Storable(c)
}

// encodeThreadState is the value of st ("" when it holds nothing). The
// cursors are stored as merging them into nothing leaves them, as a
// channel's are.
func encodeThreadState(st thread.State) (string, error) {
	if err := threadStorable(st); err != nil {
		return "", err
	}
	var b []byte
	if st.Follow != (thread.Follow{}) {
		if st.Follow.Following {
			b = append(b, '+')
		} else {
			b = append(b, '-')
		}
		b = redisstore.AppendB62(b, st.Follow.VersionUnixMs)
	}
	if len(st.Mentions) > 0 {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, '@')
		for i, m := range st.Mentions {
			if i > 0 {
				b = append(b, ',')
			}
			b = redisstore.AppendB62(b, m)
		}
	}
	c := st.Cursors
	c.Key = st.Key.ChannelKey()
	if merged, moved := receipt.Merge(receipt.State{Key: c.Key}, c); moved {
		merged.PrivateRead.MessageID = ""
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = cursors.AppendValue(b, merged)
	}
	return string(b), nil
}

var errThreadValue = errors.New("not a thread register")

// decodeThreadState inverts encodeThreadState ("" is the empty register).
func decodeThreadState(k thread.Key, v string) (thread.State, error) {
	st := thread.State{Key: k}
	bad := func(err error) (thread.State, error) {
		return thread.State{}, fmt.Errorf("decoding the redis thread register of %s/%s: unexpected %q: %w", k.User, k.Ref, v, err)
	}
	rest := v
	next := func() string {
		tok, tail, _ := strings.Cut(rest, " ")
		rest = tail
		return tok
	}
	if rest != "" && (rest[0] == '+' || rest[0] == '-') {
		tok := next()
		n, err := redisstore.ParseB62(tok[1:])
		if err != nil {
			return bad(err)
		}
		st.Follow = thread.Follow{Following: tok[0] == '+', VersionUnixMs: n}
		if st.Follow == (thread.Follow{}) {
			return bad(errThreadValue) // the zero register is never written
		}
	}
	if rest != "" && rest[0] == '@' {
		tok := next()
		st.Mentions = make([]int64, 0, strings.Count(tok, ",")+1)
		for m := range strings.SplitSeq(tok[1:], ",") {
			n, err := redisstore.ParseB62(m)
			if err != nil {
				return bad(err)
			}
			st.Mentions = append(st.Mentions, n)
		}
	}
	if rest != "" {
		if rest[0] == '+' || rest[0] == '-' || rest[0] == '@' || strings.HasPrefix(rest, "v1:") {
			return bad(errThreadValue)
		}
		c, err := cursors.DecodeValue(k.ChannelKey(), rest)
		if err != nil {
			return bad(err)
		}
		c.Key = receipt.Key{}
		st.Cursors = c
	}
	return st, nil
}
