package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/thread"
)

// mentionInThreads posts, as alice, one reply mentioning bob in each of
// n threads of channel c (roots 2..n+1), in calls of 500 notices.
func mentionInThreads(t *testing.T, tb *testBundle, n int) {
	t.Helper()
	for start := 2; start <= n+1; start += 500 {
		var items []string
		for root := start; root < start+500 && root <= n+1; root++ {
			items = append(items, fmt.Sprintf(`{"channel_id": "c", "thread_root_seq": %d, "seq": 1, "message_id": "r%d", "sender_id": "alice", "mentions": ["bob"]}`, root, root))
		}
		tb.ok(t, http.MethodPost, "/v1/messages:notify", `{"notices": [`+strings.Join(items, ",")+`]}`)
	}
}

// threadLockout is the scenario: others mention bob in more threads than
// a user's registers are bounded to (each mention makes bob follow its
// thread). bob's counts, inbox, thread list and badges keep answering;
// the registers in Redis go back under the bound; a thread the collector
// dropped answers its durable cursor, not one below it.
func threadLockout(t *testing.T, bound, followed int) {
	tb := setup(t, setupOpts{restoreTimeout: 30 * time.Second, config: func(c *testConfig) { c.ThreadsPerUser = bound }})
	startPersister(t, tb)
	for _, u := range []string{"alice", "bob"} {
		tb.ok(t, http.MethodPut, "/v1/channels/c/members/"+u, `{}`)
	}
	tb.ok(t, http.MethodPost, "/v1/channels/c/messages", fmt.Sprintf(`{"seq": %d, "message_id": "m", "sender_id": "alice"}`, followed+1))
	// bob reads thread 1 before the others crowd it out.
	tb.ok(t, http.MethodPost, "/v1/channels/c/threads/1/messages", `{"seq": 1, "message_id": "r", "sender_id": "alice"}`)
	tb.ok(t, http.MethodPost, "/v1/users/bob/channels/c/threads/1/read", `{"seq": 1}`)
	mentionInThreads(t, tb, followed)

	ctx := context.Background()
	require.Eventually(t, func() bool {
		n, err := threads.NewStore(nil, tb.store).Counts(ctx, []string{"bob"})
		return err == nil && n[0] <= int64(bound)
	}, 60*time.Second, 50*time.Millisecond, "the collector brings bob's registers under the bound")
	require.Positive(t, tb.metric(t, "receipts_kafkagate_threads_collected_total"))

	for _, path := range []string{"/v1/users/bob/unread", "/v1/users/bob/inbox", "/v1/users/bob/threads"} {
		status, body := tb.do(t, http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	}
	var lr receiptsv1.LookupReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:lookup", `{"badge_user_ids": ["bob"]}`, &lr)
	require.Len(t, lr.GetBadges(), 1)

	// Thread 1 was the least recently active: collected. A stale read of
	// it answers the durable cursor (1), looked up in Postgres.
	got, err := threads.NewStore(nil, tb.store).StatesRedis(ctx, []thread.Key{{User: "bob", Ref: thread.Ref{Channel: "c", Root: 1}}})
	require.NoError(t, err)
	require.Nil(t, got[0], "thread 1 is collected from Redis")
	var mr receiptsv1.ThreadMarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/bob/channels/c/threads/1/read", `{"seq": 1}`, &mr)
	require.EqualValues(t, 1, mr.GetThread().GetRead().GetSeq())
	require.False(t, mr.GetAdvanced(), "the durable cursor was looked up: nothing advances")
}

func TestThreadMentionsCannotLockAUserOut(t *testing.T) {
	t.Parallel()
	threadLockout(t, 40, 61)
}

// The numbers: 10,001 threads against the default bound.
func TestThreadMentionsCannotLockAUserOutAtScale(t *testing.T) {
	t.Parallel()
	threadLockout(t, threads.MaxUserThreads, threads.MaxUserThreads+1)
}
