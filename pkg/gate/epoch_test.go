package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

// TestExplicitEpochAheadRefused: a client may send an epoch it read (the
// stored one, or an older one: stale), never one ahead of the stored read
// epoch — that would move the public read cursor back without a
// mark-unread. {"seq":1,"epoch":5} against a cursor at (0, 900) is a 400
// that writes nothing, in Redis or Kafka, single or batched; an epoch past
// receipt.MaxEpoch is a 400 at validation.
func TestExplicitEpochAheadRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/read", `{"seq": 900}`, &mr)

	for _, call := range []struct{ path, body string }{
		{"/v1/users/ann/channels/c/read", `{"seq": 1, "epoch": 5}`},
		{"/v1/receipts:mark", `{"receipts": [{"user_id": "ann", "channel_id": "d", "kind": "READ", "seq": 3},
			{"user_id": "ann", "channel_id": "c", "kind": "READ", "seq": 1, "epoch": 5}]}`},
		{"/v1/users/ann/channels/c/read", `{"seq": 1, "epoch": 1, "private": true}`},
	} {
		status, b := tb.do(t, http.MethodPost, call.path, call.body)
		apierrtest.RefusedREST(t, status, b, http.StatusBadRequest, apierr.EpochAhead, call.body)
		require.Contains(t, parseRESTError(t, b).Message, "ahead of the stored read epoch 0", "%s", call.body)
	}
	states, _, err := cursors.NewStore(tb.store).Get(ctx, "ann", nil)
	require.NoError(t, err)
	require.Len(t, states, 1, "the refused batch wrote nothing, not even its valid mark")
	require.Equal(t, receipt.Position{Seq: 900}, states[0].Read.Position)
	require.Equal(t, int64(1), tb.highWatermarks(t), "only the first mark was produced")

	for _, body := range []string{`{"seq": 1, "epoch": "9223372036854775807"}`, `{"seq": 1, "epoch": "2147483648"}`} {
		status, b := tb.do(t, http.MethodPost, "/v1/users/ann/channels/c/read", body)
		apierrtest.RefusedREST(t, status, b, http.StatusBadRequest, apierr.InvalidEpoch)
		require.Contains(t, parseRESTError(t, b).Message, "epoch: must be between 0 and 2147483647")
	}

	// The epochs the client read still apply: the stored one, and after a
	// mark-unread the new one.
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/read", `{"seq": 901, "epoch": 0}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/unread", `{"seq": 10}`, &mr)
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/read", `{"seq": 12, "epoch": 1}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	require.Equal(t, int64(901), mr.GetResult().GetState().GetRead().GetPosition().GetSeq(), "the public read never moves back")
	require.Equal(t, int64(1), mr.GetResult().GetState().GetPrivateRead().GetPosition().GetEpoch())
	require.Equal(t, int64(12), mr.GetResult().GetState().GetPrivateRead().GetPosition().GetSeq())
	require.Empty(t, mr.GetResult().GetReason())
}

// TestStaleMarkInABatchSaysWhy: a mark of an epoch older than the stored
// one changes nothing while the others of its batch are taken; its own
// result says STALE_EPOCH (REST on the fast path and vanguard, and gRPC).
func TestStaleMarkInABatchSaysWhy(t *testing.T) {
	t.Parallel()
	const batch = `{"receipts": [{"user_id": "ann", "channel_id": "c", "kind": "READ", "seq": 30, "epoch": 0},
		{"user_id": "ann", "channel_id": "d", "kind": "READ", "seq": 5}]}`
	check := func(name string, results []*receiptsv1.ReceiptResult) {
		t.Helper()
		require.Len(t, results, 2, name)
		require.Equal(t, string(apierr.StaleEpoch), results[0].GetReason(), name)
		require.False(t, results[0].GetAdvanced(), name)
		require.Equal(t, receiptsv1.Durability_DURABILITY_UNSPECIFIED, results[0].GetDurability(), "%s: the stale mark was not written", name)
		require.Empty(t, results[1].GetReason(), name)
		require.True(t, results[1].GetAdvanced(), name)
	}
	for _, transcodeAll := range []bool{false, true} {
		tb := setup(t, setupOpts{config: func(c *testConfig) { c.Server.TranscodeAllREST = transcodeAll }})
		var mr receiptsv1.MarkResponse
		tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/read", `{"seq": 20}`, &mr)
		tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/unread", `{"seq": 10}`, &mr)
		var out receiptsv1.MarkReceiptsResponse
		tb.doProto(t, http.MethodPost, "/v1/receipts:mark", batch, &out)
		check(fmt.Sprintf("REST (all transcoded: %v)", transcodeAll), out.GetResults())
		if !transcodeAll {
			continue
		}
		resp, err := tb.client(connect.WithGRPC()).MarkReceipts(context.Background(), connect.NewRequest(&receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
			{UserId: "ann", ChannelId: "c", Kind: receiptsv1.Kind_READ, Seq: 31, Epoch: new(int64(0))},
			{UserId: "ann", ChannelId: "d", Kind: receiptsv1.Kind_READ, Seq: 6},
		}}))
		require.NoError(t, err)
		check("gRPC", resp.Msg.GetResults())
	}
}

// TestExplicitEpochUncheckedWithoutRedis: with Redis down an explicit
// epoch above 0 is checked against Postgres; ahead of it, it is not
// acknowledged (Postgres may lag a mark-unread Redis took: retry), and
// nothing reaches Kafka. Epoch 0 cannot be ahead and is taken.
func TestExplicitEpochUncheckedWithoutRedis(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = down.Close() })
	tb := setup(t, setupOpts{redis: down})

	status, b := tb.do(t, http.MethodPost, "/v1/users/bo/channels/c/read", `{"seq": 1, "epoch": 5}`)
	apierrtest.RefusedREST(t, status, b, http.StatusServiceUnavailable, apierr.Unavailable)
	require.Zero(t, tb.highWatermarks(t))

	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/bo/channels/c/read", `{"seq": 1, "epoch": 0}`, &mr)
	require.Equal(t, int64(1), tb.highWatermarks(t))
}

// TestMarkUnreadAtEpochLimit: a cursor at receipt.MaxEpoch cannot be
// marked unread again (the epoch would leave every store's bound); the
// call is refused and nothing moves.
func TestMarkUnreadAtEpochLimit(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	k := receipt.Key{User: "cy", Channel: "c"}
	top := receipt.Cursor{Position: receipt.Position{Epoch: receipt.MaxEpoch, Seq: 40}}
	_, err := cursors.NewStore(tb.store).Merge(ctx, []receipt.State{{Key: k, Read: top, Delivered: receipt.Cursor{Position: pos(40)}}})
	require.NoError(t, err)

	status, b := tb.do(t, http.MethodPost, "/v1/users/cy/channels/c/unread", `{"seq": 10}`)
	apierrtest.RefusedREST(t, status, b, http.StatusBadRequest, apierr.EpochLimit)
	require.Contains(t, parseRESTError(t, b).Message, receipt.ErrEpochLimit.Error())
	states, _, err := cursors.NewStore(tb.store).Get(ctx, "cy", nil)
	require.NoError(t, err)
	require.Equal(t, top.Position, states[0].Read.Position)
	require.Zero(t, tb.highWatermarks(t))
}
