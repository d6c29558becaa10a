package watch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/readby"
)

// A resume whose catch-up range (token, reader's position] is read after
// the reader has already offered the new subscription newer entries must
// still merge that range. (The catch-up used to start from the
// subscription's merged id, which the reader had moved past the range:
// the range was skipped, and a resumed watcher under load never saw those
// updates — the flaky TestWatchTwoReplicas.)
func TestResumeCatchUpAfterTheReaderOffered(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	ctx := context.Background()
	add := func(user string, seq int64) streamID {
		t.Helper()
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "cv:{c}:s",
			Values: []any{"u", user, "k", "r", "e", "0", "s", seq, "t", 1}}).Result()
		require.NoError(t, err)
		sid, err := parseStreamID(id)
		require.NoError(t, err)
		return sid
	}
	h, err := New(Config{Redis: rdb, Keys: readby.NewStore(nil, redisstore.New(rdb, redisstore.Config{Prefix: prefix})), Coalesce: time.Millisecond, Block: 20 * time.Millisecond})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return h.Ready(ctx) == nil }, 5*time.Second, 5*time.Millisecond)

	add("u1", 1)
	// A watcher keeps the reader on the channel; another one's opening
	// token is where the resume starts.
	keep, err := h.Subscribe(ctx, []string{"c"}, "")
	require.NoError(t, err)
	defer keep.Close()
	first, err := h.Subscribe(ctx, []string{"c"}, "")
	require.NoError(t, err)
	opening, err := first.Next(ctx)
	require.NoError(t, err)
	first.Close()
	token := opening.GetResumeToken()

	// After the token: u2, which the reader reads before the resume.
	id2 := add("u2", 2)
	readerAt := func(id streamID) func() bool {
		return func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			w := h.watched["c"]
			return w != nil && w.pos.compare(id) >= 0
		}
	}
	require.Eventually(t, readerAt(id2), 5*time.Second, 5*time.Millisecond)

	// Between the registration and the catch-up, u3 arrives and the reader
	// offers it to the resuming subscription.
	h.afterRegister = func(s *Subscription) {
		id3 := add("u3", 3)
		require.Eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.merged["c"].compare(id3) >= 0
		}, 5*time.Second, 5*time.Millisecond, "the reader offers u3 before the catch-up")
	}
	resumed, err := h.Subscribe(ctx, []string{"c"}, token)
	require.NoError(t, err)
	defer resumed.Close()
	h.afterRegister = nil
	got := map[string]int64{}
	nctx, ncancel := context.WithTimeout(ctx, 5*time.Second)
	defer ncancel()
	for len(got) < 2 {
		ev, err := resumed.Next(nctx)
		require.NoError(t, err, "have %v: u2 (the catch-up range) is missing", got)
		require.Empty(t, ev.GetSnapshot(), "a fresh token resumes with updates")
		for _, u := range ev.GetUpdates() {
			require.Equal(t, receiptsv1.Kind_READ, u.GetKind())
			got[u.GetUserId()] = u.GetPosition().GetSeq()
		}
	}
	require.Equal(t, map[string]int64{"u2": 2, "u3": 3}, got)
}
