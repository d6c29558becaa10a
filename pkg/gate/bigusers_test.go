package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	headkind "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
)

// A user with more channels than one read of Postgres returns, whose
// state Redis does not hold (lost, or never loaded): every page of the
// default set answers, with every channel's counts, and a listed channel
// past the first 10,000 reads its cursor, never 0.
func TestUserWithMoreThanTenThousandChannels(t *testing.T) {
	t.Parallel()
	// The test is about paging, not speed: under a loaded CI one read of
	// a page of the default set can pass the 2 s default.
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.PostgresTimeout = 30 * time.Second }})
	ctx := context.Background()
	const n = 10_050
	var states []receipt.State
	var regs []channel.Membership
	var heads []channel.Head
	for i := range n {
		ch := fmt.Sprintf("ch%05d", i)
		k := receipt.Key{User: "big", Channel: ch}
		states = append(states, receipt.State{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 3}}, Delivered: receipt.Cursor{Position: receipt.Position{Seq: 3}}, UpdatedAtUnixMs: 1})
		regs = append(regs, channel.Join(k, 1, 1, 1))
		heads = append(heads, channel.Head{Channel: ch, Seq: 5, UpdatedAtUnixMs: 1})
	}
	_, err := cursors.NewPostgres(tb.schema.Store).Upsert(ctx, states)
	require.NoError(t, err)
	_, err = members.NewStore(tb.schema.Store, nil).WritePG(ctx, regs)
	require.NoError(t, err)
	_, err = headkind.NewStore(tb.schema.Store, nil).WritePG(ctx, heads)
	require.NoError(t, err)

	seen, token := 0, ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20)
		var ur receiptsv1.GetUnreadResponse
		tb.doProto(t, http.MethodGet, "/v1/users/big/unread?page_size=1000&page_token="+url.QueryEscape(token), "", &ur)
		for _, c := range ur.GetChannels() {
			require.EqualValues(t, 2, c.GetUnreadCount(), c.GetChannelId())
			seen++
		}
		if token = ur.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Equal(t, n, seen, "every channel of the default set, over its pages")

	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/big/read-state?channel_id=ch10040", "", &rs)
	require.Len(t, rs.GetChannels(), 1)
	require.EqualValues(t, 3, rs.GetChannels()[0].GetRead().GetPosition().GetSeq(), "past the first 10,000: its cursor, not 0")
}
