package readby

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Thread moves in the channel view's stream. A thread's public cursors
// and its head reach the channel's watchers through the channel's stream
// cv:{C}:s, as entries of their own kinds so that a reader that does not
// know threads skips them rather than taking them for channel cursors:
//
//	k "tr"|"td"  a member's public thread read / delivered cursor: u user,
//	             root root seq, e epoch, s seq, t at_unix_ms
//	k "th"       a thread's head: root, s head seq, t at_unix_ms
//
// They never enter the view's cursor hash or sorted sets (read-by, ticks
// and watermarks are the channel's own cursors), so they are appended by
// the caller only for moves it saw advance: a duplicate costs a repeated,
// harmless entry.

// Thread entry kinds of the channel view's stream.
const (
	ThreadRead      = "tr"
	ThreadDelivered = "td"
	ThreadHead      = "th"
)

// ThreadEntry is one thread move for a channel's stream: a member's
// public thread cursor (Kind ThreadRead or ThreadDelivered, User set) or
// a thread's head (Kind ThreadHead, Position.Seq the head).
type ThreadEntry struct {
	Channel  string
	Root     int64
	User     string
	Kind     string
	Position receipt.Position
	AtUnixMs int64
}

// AppendThreadEntries appends thread moves to their channels' streams
// (MAXLEN ~ streamMaxLen; ≤ 0 uses the default) in one pipeline.
func (s Store) AppendThreadEntries(ctx context.Context, entries []ThreadEntry, streamMaxLen int64) error {
	if len(entries) == 0 {
		return nil
	}
	if streamMaxLen <= 0 {
		streamMaxLen = StreamMaxLenDefault
	}
	for _, e := range entries {
		switch e.Kind {
		case ThreadRead, ThreadDelivered:
			if e.User == "" {
				return fmt.Errorf("thread view entry: kind %q needs a user", e.Kind)
			}
		case ThreadHead:
		default:
			return fmt.Errorf("thread view entry: unknown kind %q", e.Kind)
		}
	}
	cmds := make([]*redis.StringCmd, len(entries))
	if err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, e := range entries {
			values := []any{"k", e.Kind, "root", strconv.FormatInt(e.Root, 10)}
			if e.Kind != ThreadHead {
				values = append(values, "u", e.User)
			}
			values = append(values, "e", strconv.FormatInt(e.Position.Epoch, 10), "s", strconv.FormatInt(e.Position.Seq, 10),
				"t", strconv.FormatInt(e.AtUnixMs, 10))
			cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.StreamKey(e.Channel), MaxLen: streamMaxLen, Approx: true, Values: values})
		}
	}); err != nil {
		return err
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("%w: appending thread moves: %w", redisstore.ErrUnavailable, err)
		}
	}
	return nil
}
