package gate_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
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
		require.Equal(t, http.StatusBadRequest, status, "%s: body %s", call.body, b)
		require.Contains(t, parseRESTError(t, b).Message, "ahead of the stored read epoch 0", "%s", call.body)
	}
	states, _, err := tb.store.Get(ctx, "ann", nil)
	require.NoError(t, err)
	require.Len(t, states, 1, "the refused batch wrote nothing, not even its valid mark")
	require.Equal(t, receipt.Position{Seq: 900}, states[0].Read.Position)
	require.Equal(t, int64(1), tb.highWatermarks(t), "only the first mark was produced")

	for _, body := range []string{`{"seq": 1, "epoch": "9223372036854775807"}`, `{"seq": 1, "epoch": "2147483648"}`} {
		status, b := tb.do(t, http.MethodPost, "/v1/users/ann/channels/c/read", body)
		require.Equal(t, http.StatusBadRequest, status, "body: %s", b)
		require.Contains(t, parseRESTError(t, b).Message, "epoch: must be between 0 and 2147483647")
	}

	// The epochs the client read still apply: the stored one, and after a
	// mark-unread the new one.
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/read", `{"seq": 901, "epoch": 0}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/unread", `{"seq": 10}`, &mr)
	tb.doProto(t, http.MethodPost, "/v1/users/ann/channels/c/read", `{"seq": 12, "epoch": 1}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	require.Equal(t, int64(1), mr.GetResult().GetState().GetRead().GetPosition().GetEpoch())
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
	require.Equal(t, http.StatusServiceUnavailable, status, "body: %s", b)
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
	_, err := tb.store.Merge(ctx, []receipt.State{{Key: k, Read: top, Delivered: receipt.Cursor{Position: pos(40)}}})
	require.NoError(t, err)

	status, b := tb.do(t, http.MethodPost, "/v1/users/cy/channels/c/unread", `{"seq": 10}`)
	require.Equal(t, http.StatusBadRequest, status, "body: %s", b)
	require.Contains(t, parseRESTError(t, b).Message, receipt.ErrEpochLimit.Error())
	states, _, err := tb.store.Get(ctx, "cy", nil)
	require.NoError(t, err)
	require.Equal(t, top.Position, states[0].Read.Position)
	require.Zero(t, tb.highWatermarks(t))
}
