package gate

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/privacy"
)

// A mark's public cursors reach the channel view (and its stream) in the
// same call; a user who does not share reads appears with delivered only.
func TestMarksReachTheChannelView(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	_, err := tb.store.MergeSettings(ctx, []privacy.Settings{{User: "hid", ShareRead: false, ShareDelivered: true, VersionMs: 1}})
	require.NoError(t, err)
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, "POST", "/v1/receipts:mark", markBody(
		`{"user_id": "a", "channel_id": "g", "kind": "READ", "seq": 4}`,
		`{"user_id": "b", "channel_id": "g", "kind": "DELIVERED", "seq": 6}`,
		`{"user_id": "hid", "channel_id": "g", "kind": "READ", "seq": 5}`,
	), &mr)
	views, err := tb.store.ReadViews(ctx, []string{"g"})
	require.NoError(t, err)
	v := views[0]
	require.Equal(t, int64(4), v.Read["a"].Position.Seq)
	require.Equal(t, int64(4), v.Delivered["a"].Position.Seq, "reading implies delivery")
	require.NotContains(t, v.Read, "b")
	require.Equal(t, int64(6), v.Delivered["b"].Position.Seq)
	require.NotContains(t, v.Read, "hid", "a user who does not share reads never enters the read view")
	require.Equal(t, int64(5), v.Delivered["hid"].Position.Seq, "their delivery still shows")
	require.NotEmpty(t, v.LastID)
	n, err := tb.rdb.XLen(ctx, tb.store.ViewStreamKey("g")).Result()
	require.NoError(t, err)
	require.Equal(t, int64(4), n, fmt.Sprint("moves streamed: ", n))
}
