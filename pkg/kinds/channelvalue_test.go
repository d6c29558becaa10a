package kinds_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/thread"
)

// The head, the deletion count and the group mention top share the
// channel value: each script writes its part and keeps the others, in any
// order; an older build's value (the head alone) reads as the head with
// the other parts unknown. (Here, with the kinds that write the count and
// the top, each in a folder of its own.)
func TestChannelValueKeepsItsParts(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	ctx := context.Background()
	require.NoError(t, s.Load(ctx, append(deletions.Scripts, groupmentions.Scripts...)...))
	gm, del := groupmentions.NewStore(nil, s), deletions.NewStore(nil, s)
	// parts is the head ("?" when unknown), the deletion count and the
	// group mention top of a channel.
	parts := func(ch string) [3]string {
		t.Helper()
		// The head's three fields ("-" first: unknown), then the deletion
		// count and the top ("-": unknown), or none (an older build's).
		f := strings.Fields(rdb.Get(ctx, headkind.NewStore(nil, s).RedisKey(ch)).Val())
		head, dn, top := strings.Join(f[:3], " "), "", ""
		if f[0] == "-" {
			head = "?"
		}
		if len(f) == 5 {
			dn, top = strings.TrimPrefix(f[3], "-"), strings.TrimPrefix(f[4], "-")
		}
		return [3]string{head, dn, top}
	}
	deletions := func(ch string, seqs ...int64) {
		t.Helper()
		require.NoError(t, del.HydrateRedis(ctx, []thread.Ref{{Channel: ch}}, []channel.Deletions{{Channel: ch, Seqs: seqs}}))
	}
	raise := func(ch string, seq int64) {
		t.Helper()
		_, err := headkind.NewStore(nil, s).RaiseRedis(ctx, []channel.Head{{Channel: ch, Seq: seq, MessageID: "m", UpdatedAtUnixMs: 62}})
		require.NoError(t, err)
	}
	groups := func(ch string, seq int64) {
		t.Helper()
		require.NoError(t, gm.HydrateRedis(ctx, []channel.GroupMentions{{Channel: ch, Mentions: []channel.GroupMention{{Seq: seq, Sender: "x"}}}}))
	}

	// Deletions first: the head stays unknown until raised.
	deletions("a", 1, 2)
	require.Equal(t, [3]string{"?", "2", ""}, parts("a"))
	raise("a", 3)
	groups("a", 2)
	require.Equal(t, [3]string{"3 m 10", "2", redisstore.PadSeq(2)}, parts("a"))
	// A lower head changes nothing; a higher one keeps the other parts.
	raise("a", 2)
	raise("a", 4)
	deletions("a", 4)
	require.Equal(t, [3]string{"4 m 10", "3", redisstore.PadSeq(2)}, parts("a"))

	// The other order.
	groups("b", 7)
	raise("b", 9)
	deletions("b")
	require.Equal(t, [3]string{"9 m 10", "0", redisstore.PadSeq(7)}, parts("b"))
	_, err := del.AddRedis(ctx, []channel.Deletions{{Channel: "b", Seqs: []int64{8}}})
	require.NoError(t, err)
	require.Equal(t, [3]string{"9 m 10", "1", redisstore.PadSeq(7)}, parts("b"), "a kept count follows each deletion")

	// An older build's value: the head, the rest unknown; writes fill it.
	require.NoError(t, rdb.Set(ctx, headkind.NewStore(nil, s).RedisKey("c"), "5 m 10", 0).Err())
	require.Equal(t, [3]string{"5 m 10", "", ""}, parts("c"))
	_, err = del.AddRedis(ctx, []channel.Deletions{{Channel: "c", Seqs: []int64{1}}})
	require.NoError(t, err)
	require.Equal(t, [3]string{"5 m 10", "", ""}, parts("c"), "an unknown count stays unknown until hydrated")
	deletions("c", 2)
	require.Equal(t, [3]string{"5 m 10", "2", ""}, parts("c"))
	heads, err := headkind.NewStore(nil, s).ReadRedis(ctx, []string{"a", "b", "c", "none"})
	require.NoError(t, err)
	require.Len(t, heads, 3)
	require.Equal(t, channel.Head{Channel: "c", Seq: 5, MessageID: "m", UpdatedAtUnixMs: 62}, heads["c"])
}
