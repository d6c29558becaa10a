package gate_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	memberkind "github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// TestViewRebuildIsSingleFlight: concurrent reads of a large channel
// whose view is not loaded share one rebuild, which fills the view's
// counts from Postgres; the answers are counts (no members).
func TestViewRebuildIsSingleFlight(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.ReadBy.DetailThreshold = 2 }})
	ctx := context.Background()
	const members = 5
	now := time.Now().UnixMilli()
	for i := range members {
		u := "u" + strconv.Itoa(i)
		status, body := tb.do(t, http.MethodPut, "/v1/channels/big/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
		k := receipt.Key{User: u, Channel: "big"}
		_, err := cursors.NewPostgres(tb.schema.Store).Upsert(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: int64(3 + i)}},
			UpdatedAtUnixMs: now}})
		require.NoError(t, err)
		_, err = memberkind.NewStore(tb.schema.Store, nil).WritePG(ctx, []channel.Membership{channel.Join(k, 0, now, 0)})
		require.NoError(t, err)
	}
	// Redis lost the view (a FLUSHALL of its keys).
	require.NoError(t, tb.rdb.Del(ctx, readby.NewStore(nil, tb.store).LoadedKey("big"), readby.NewStore(nil, tb.store).CurKey("big")).Err())

	var rebuilds atomic.Int32
	release := make(chan struct{})
	gate.SetRebuildHook(tb.gate, func() {
		rebuilds.Add(1)
		<-release
	})
	const callers = 8
	var wg sync.WaitGroup
	answers := make([]*receiptsv1.ChannelTicks, callers)
	for i := range callers {
		wg.Go(func() {
			var ticks receiptsv1.ChannelTicks
			tb.doProto(t, http.MethodGet, "/v1/channels/big/ticks", "", &ticks)
			answers[i] = &ticks
		})
	}
	require.Eventually(t, func() bool { return rebuilds.Load() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // let every caller reach the rebuild
	close(release)
	wg.Wait()
	require.Equal(t, int32(1), rebuilds.Load(), "one rebuild for every concurrent caller")
	for _, a := range answers {
		require.False(t, a.GetDetailed())
		require.Empty(t, a.GetMembers())
		require.Equal(t, int64(members), a.GetMemberCount())
		require.Equal(t, int64(3), a.GetReadByAllUpTo(), "the counts come from the rebuilt view")
	}
	views, err := readby.NewStore(nil, tb.store).ReadUpTo(ctx, []string{"big"}, 2)
	require.NoError(t, err)
	require.True(t, views[0].Loaded)
	require.True(t, views[0].CursorsLeftOut, "a large view's cursors are not read")
	require.Empty(t, views[0].Read)
}
