package gate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/views/readby"
)

// A mark's public cursors reach the channel view (and its stream) in the
// same call; a user who does not share reads appears with delivered only.
func TestMarksReachTheChannelView(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	_, err := settings.NewStore(nil, tb.store).MergeRedis(ctx, []privacy.Settings{{User: "hid", ShareRead: false, ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	for _, u := range []string{"a", "b", "hid"} {
		status, body := tb.do(t, "PUT", "/v1/channels/g/members/"+u, `{}`)
		require.Equal(t, 200, status, "join %s: %s", u, body)
	}
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, "POST", "/v1/receipts:mark", markBody(
		`{"user_id": "a", "channel_id": "g", "kind": "READ", "seq": 4}`,
		`{"user_id": "b", "channel_id": "g", "kind": "DELIVERED", "seq": 6}`,
		`{"user_id": "hid", "channel_id": "g", "kind": "READ", "seq": 5}`,
	), &mr)
	views, err := readby.NewStore(nil, tb.store).ReadAll(ctx, []string{"g"})
	require.NoError(t, err)
	v := views[0]
	require.Equal(t, int64(4), v.Read["a"].Position.Seq)
	require.Equal(t, int64(4), v.Delivered["a"].Position.Seq, "reading implies delivery")
	require.NotContains(t, v.Read, "b")
	require.Equal(t, int64(6), v.Delivered["b"].Position.Seq)
	require.NotContains(t, v.Read, "hid", "a user who does not share reads never enters the read view")
	require.Equal(t, int64(5), v.Delivered["hid"].Position.Seq, "their delivery still shows")
	require.NotEmpty(t, v.LastID)
	n, err := tb.rdb.XLen(ctx, readby.NewStore(nil, tb.store).StreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(4), n, fmt.Sprint("moves streamed: ", n))
}

// Only members enter a view: the marks of an untracked channel (no
// registered members, so anyone may mark it) never show in read-by, ticks
// or a watch, so they cost no view write.
func TestUntrackedChannelMarksStayOutOfTheView(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, "POST", "/v1/receipts:mark", markBody(
		`{"user_id": "a", "channel_id": "open", "kind": "READ", "seq": 4}`,
		`{"user_id": "b", "channel_id": "open", "kind": "DELIVERED", "seq": 6}`,
	), &mr)
	require.Len(t, mr.GetResults(), 2)
	require.True(t, mr.GetResults()[0].GetAdvanced(), "the mark itself is accepted and merged")
	views, err := readby.NewStore(nil, tb.store).ReadAll(ctx, []string{"open"})
	require.NoError(t, err)
	require.Empty(t, views[0].Read)
	require.Empty(t, views[0].Delivered)
	n, err := tb.rdb.XLen(ctx, readby.NewStore(nil, tb.store).StreamKey("open")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing streamed")

	// Once a's join registers membership, a's moves show (the join
	// publishes the cursor a already holds).
	status, body := tb.do(t, "PUT", "/v1/channels/open/members/a", `{}`)
	require.Equal(t, 200, status, "join: %s", body)
	views, err = readby.NewStore(nil, tb.store).ReadAll(ctx, []string{"open"})
	require.NoError(t, err)
	require.Equal(t, int64(4), views[0].Read["a"].Position.Seq)
	require.NotContains(t, views[0].Delivered, "b")
}
