package gate_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/jwttest"
	"github.com/readstate/receipts/pkg/kinds/fullyread"
	"github.com/readstate/receipts/pkg/receipt"
)

// The fully-read marker is set over REST, gRPC and Connect, per channel
// and per thread; the greatest wins whichever device sets it; it is
// returned with the read state (GetReadState) and the thread list, apart
// from the read cursor and from every unread count; it survives the loss
// of every Redis key (the persister has it); and an erasure takes it.
func TestFullyReadMarker(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	startPersister(t, tb)
	ctx := context.Background()
	connectCl, grpcCl := tb.client(), tb.client(connect.WithGRPC())
	tb.ok(t, http.MethodPut, "/v1/channels/fc/members/fu", `{}`)
	tb.ok(t, http.MethodPost, "/v1/channels/fc/messages", `{"seq": 9, "sender_id": "x"}`)
	tb.ok(t, http.MethodPost, "/v1/users/fu/channels/fc/read", `{"seq": 2}`)

	var set receiptsv1.SetFullyReadResponse
	tb.doProto(t, http.MethodPut, "/v1/users/fu/channels/fc/fully-read", `{"seq": 6, "message_id": "$m6"}`, &set)
	require.True(t, set.GetChanged())
	require.Equal(t, int64(6), set.GetFullyRead().GetSeq())
	require.Equal(t, receiptsv1.Durability_KAFKA, set.GetDurability())

	// Another device sets an older marker: the newer stays, and says so.
	older, err := grpcCl.SetFullyRead(ctx, connect.NewRequest(&receiptsv1.SetFullyReadRequest{UserId: "fu", ChannelId: "fc", Seq: 4}))
	require.NoError(t, err)
	require.False(t, older.Msg.GetChanged())
	require.Equal(t, "$m6", older.Msg.GetFullyRead().GetMessageId())
	_, err = connectCl.SetFullyRead(ctx, connect.NewRequest(&receiptsv1.SetFullyReadRequest{UserId: "fu", ChannelId: "fc", ThreadRootSeq: 3, Seq: 2, MessageId: "$r2"}))
	require.NoError(t, err)

	check := func(when string) {
		t.Helper()
		rs, err := connectCl.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "fu"}))
		require.NoError(t, err, when)
		require.Len(t, rs.Msg.GetChannels(), 1, when)
		st := rs.Msg.GetChannels()[0]
		require.Equal(t, int64(6), st.GetFullyRead().GetSeq(), when)
		require.Equal(t, int64(2), st.GetRead().GetPosition().GetSeq(), "%s: the read cursor is its own", when)
		un, err := grpcCl.GetUnread(ctx, connect.NewRequest(&receiptsv1.GetUnreadRequest{UserId: "fu"}))
		require.NoError(t, err, when)
		require.Equal(t, int64(7), un.Msg.GetUnreadTotal(), "%s: no unread count moves", when)
		// A listed channel with a marker and no cursor is answered too.
		listed, err := grpcCl.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "fu", ChannelId: []string{"fc", "none"}}))
		require.NoError(t, err, when)
		require.Len(t, listed.Msg.GetChannels(), 1, when)
	}
	check("in Redis")

	// Every Redis key lost, once Postgres has the markers: read back from
	// Postgres (and hydrated).
	require.Eventually(t, func() bool {
		ms, err := fullyread.NewStore(tb.schema.Store, nil).UserPG(ctx, "fu", 10)
		return err == nil && len(ms) == 2
	}, 15*time.Second, 20*time.Millisecond)
	require.NoError(t, tb.rdb.Del(ctx, tb.redisKeys(t)...).Err())
	check("after Redis lost everything")

	// Lost again, and an older marker set from another device before any
	// read: Redis holds that one alone, and the answer is still the newer
	// one Postgres keeps.
	require.NoError(t, tb.rdb.Del(ctx, tb.redisKeys(t)...).Err())
	older, err = connectCl.SetFullyRead(ctx, connect.NewRequest(&receiptsv1.SetFullyReadRequest{UserId: "fu", ChannelId: "fc", Seq: 3}))
	require.NoError(t, err)
	require.False(t, older.Msg.GetChanged(), "Postgres holds a greater one")
	require.Equal(t, int64(6), older.Msg.GetFullyRead().GetSeq(), "the answer never goes below what was acknowledged")
	check("after an older marker was set on an empty Redis")

	_, err = connectCl.EraseUser(ctx, connect.NewRequest(&receiptsv1.EraseUserRequest{UserId: "fu"}))
	require.NoError(t, err)
	rs, err := connectCl.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "fu", ChannelId: []string{"fc"}}))
	require.NoError(t, err)
	for _, st := range rs.Msg.GetChannels() {
		require.Nil(t, st.GetFullyRead(), "erased")
	}
	// In Postgres too, once the persister has dropped what was in flight
	// before the erasure (the marker set last).
	require.Eventually(t, func() bool {
		ms, err := fullyread.NewStore(tb.schema.Store, nil).UserPG(ctx, "fu", 10)
		return err == nil && len(ms) == 0
	}, 15*time.Second, 20*time.Millisecond, "erased in Postgres")
}

// A marker's bounds are checked where it enters: a seq of 0 or past
// 2^53, a bad root or id is refused with the field, on every protocol,
// and writes nothing.
func TestFullyReadBadInput(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, body := range []string{`{"seq": 0}`, `{"seq": 9007199254740992}`, `{"seq": 1, "thread_root_seq": -1}`, `{"seq": 1, "message_id": "a b"}`} {
		status, resp := tb.do(t, http.MethodPut, "/v1/users/u/channels/c/fully-read", body)
		apierrtest.RefusedREST(t, status, resp, http.StatusBadRequest, apierr.InvalidField, body)
	}
	_, err := tb.client(connect.WithGRPC()).SetFullyRead(context.Background(), connect.NewRequest(&receiptsv1.SetFullyReadRequest{UserId: "u", ChannelId: "c", Seq: receipt.MaxSeq + 1}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidField, "grpc")
	require.Empty(t, tb.redisKeys(t))
	require.Zero(t, tb.highWatermarks(t))
}

// An end-user token sets and reads only its own user's marker.
func TestFullyReadEndUser(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	tb, base := endUserBundle(t, iss, nil)
	alice := iss.HS256(t, jwttest.Claims("alice"))
	resp, body := restCall(t, tb.h1, base, http.MethodPut, "/v1/users/alice/channels/ca/fully-read", `{"seq": 3}`, alice)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	resp, body = restCall(t, tb.h1, base, http.MethodPut, "/v1/users/bob/channels/ca/fully-read", `{"seq": 3}`, alice)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusForbidden, apierr.NotYourUser, "bob's marker")
}
