package redisstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/thread"
)

// A head raise keeps its message's id among the channel's newest
// MessageIDsKept (late notices too), trimmed in steps.
func TestMessageIDsKept(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	n := MessageIDsKept + MessageIDsKept/10 + 50
	var heads []channel.Head
	for q := n; q >= 1; q-- { // newest first: every notice but one is late
		heads = append(heads, channel.Head{Channel: "c", Seq: int64(q), MessageID: fmt.Sprintf("m%d", q), UpdatedAtUnixMs: int64(q)})
	}
	for i := 0; i < len(heads); i += 100 {
		_, err := s.RaiseHeads(ctx, heads[i:min(i+100, len(heads))])
		require.NoError(t, err)
	}
	size := s.rdb.ZCard(ctx, s.MessageIDsKey("c")).Val()
	require.LessOrEqual(t, size, int64(MessageIDsKept+MessageIDsKept/10), "trimmed")
	ids, err := s.MessageIDs(ctx, []MessageRef{{"c", 0, int64(n)}, {"c", 0, int64(n - 900)}, {"c", 0, 0}, {"other", 0, 1}})
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("m%d", n), fmt.Sprintf("m%d", n-900), "", ""}, ids)
}

// A thread head's reply id, remembered after its raise
// (pkg/kinds/threads), is kept among the thread's newest MessageIDsKept,
// apart from the channel's ids and other threads'.
func TestReplyIDsKept(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	n := MessageIDsKept + 20
	ref := thread.Ref{Channel: "c", Root: 7}
	var heads []thread.Head
	for q := 1; q <= n; q++ {
		heads = append(heads, thread.Head{Ref: ref, Seq: int64(q), MessageID: fmt.Sprintf("r%d", q), UpdatedAtUnixMs: int64(q)})
	}
	heads = append(heads, thread.Head{Ref: thread.Ref{Channel: "c", Root: 8}, Seq: 1, MessageID: "other"})
	for i := 0; i < len(heads); i += 100 {
		require.NoError(t, s.RememberReplyIDs(ctx, heads[i:min(i+100, len(heads))]))
	}
	require.Equal(t, int64(MessageIDsKept), s.rdb.ZCard(ctx, s.threadMessageIDsKey(ref)).Val(), "trimmed to the newest")
	ids, err := s.MessageIDs(ctx, []MessageRef{{"c", 7, int64(n)}, {"c", 7, 21}, {"c", 7, 20}, {"c", 8, 1}, {"c", 0, 1}})
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("r%d", n), "r21", "", "other", ""}, ids, "the oldest trimmed; threads and the channel apart")
}
