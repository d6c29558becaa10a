package gate_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

func TestMarkReceiptsREST(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()

	var resp receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", `{"receipts": [
		{"user_id": "alice", "channel_id": "general", "kind": "READ", "seq": "12", "message_id": "m12", "device_id": "phone"},
		{"user_id": "alice", "channel_id": "random", "kind": "DELIVERED", "seq": 40},
		{"user_id": "bob", "channel_id": "general", "kind": "READ", "seq": 3}
	]}`, &resp)

	require.Len(t, resp.GetResults(), 3)
	for i, r := range resp.GetResults() {
		require.Equal(t, receiptsv1.Durability_KAFKA, r.GetDurability(), "result %d", i)
		require.True(t, r.GetAdvanced(), "result %d", i)
		require.False(t, r.GetRealtimeDegraded(), "result %d", i)
	}
	r0 := resp.GetResults()[0].GetState()
	require.Equal(t, "general", r0.GetChannelId())
	require.Equal(t, int64(12), r0.GetRead().GetPosition().GetSeq())
	require.Equal(t, "m12", r0.GetRead().GetMessageId())
	require.Equal(t, int64(12), r0.GetDelivered().GetPosition().GetSeq(), "reading implies delivery")
	require.Equal(t, "phone", r0.GetDeviceId())
	r1 := resp.GetResults()[1].GetState()
	require.Equal(t, int64(0), r1.GetRead().GetPosition().GetSeq())
	require.Equal(t, int64(40), r1.GetDelivered().GetPosition().GetSeq())

	// Redis holds the merged values.
	alice, _, err := cursors.NewStore(tb.store).Get(ctx, "alice", nil)
	require.NoError(t, err)
	slices.SortFunc(alice, func(a, b receipt.State) int { return strings.Compare(a.Key.Channel, b.Key.Channel) })
	require.Len(t, alice, 2)
	require.Equal(t, pos(12), alice[0].Read.Position)
	require.Equal(t, pos(40), alice[1].Delivered.Position)
	bob, _, err := cursors.NewStore(tb.store).Get(ctx, "bob", []string{"general"})
	require.NoError(t, err)
	require.Len(t, bob, 1)
	require.Equal(t, pos(3), bob[0].Read.Position)

	// Every mark is on the topic, keyed user:channel.
	recs, states := tb.consume(t, 3)
	got := map[string]receipt.State{}
	for i, r := range recs {
		require.Equal(t, states[i].Key.KafkaKey(), string(r.Key))
		got[string(r.Key)] = states[i]
	}
	require.Equal(t, pos(12), got["alice:general"].Read.Position)
	require.Equal(t, "m12", got["alice:general"].Read.MessageID)
	require.Equal(t, pos(12), got["alice:general"].Delivered.Position)
	require.Equal(t, "phone", got["alice:general"].DeviceID)
	require.True(t, got["alice:random"].Read.Position.IsZero())
	require.Equal(t, pos(40), got["alice:random"].Delivered.Position)
	require.Equal(t, pos(3), got["bob:general"].Read.Position)
	require.NotZero(t, got["bob:general"].UpdatedAtUnixMs)

	require.Equal(t, 3.0, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "kafka"))
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_requests_total", "rpc", "MarkReceipts", "code", "ok"))
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_produce_duration_seconds"))

	// A stale mark is durable again but does not advance.
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", `{"receipts": [{"user_id": "alice", "channel_id": "general", "kind": "READ", "seq": 5}]}`, &resp)
	require.False(t, resp.GetResults()[0].GetAdvanced())
	require.Equal(t, int64(12), resp.GetResults()[0].GetState().GetRead().GetPosition().GetSeq())
	require.Equal(t, int64(4), tb.highWatermarks(t))
}

func TestSingleMarkRoutesAndReadState(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})

	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/v1/users/carol/channels/c1/read", `{"seq": 7, "message_id": "m7"}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	require.Equal(t, receiptsv1.Durability_KAFKA, mr.GetResult().GetDurability())
	require.Equal(t, int64(7), mr.GetResult().GetState().GetRead().GetPosition().GetSeq())

	tb.doProto(t, http.MethodPost, "/v1/users/carol/channels/c1/delivered", `{"seq": 9}`, &mr)
	require.True(t, mr.GetResult().GetAdvanced())
	st := mr.GetResult().GetState()
	require.Equal(t, int64(7), st.GetRead().GetPosition().GetSeq())
	require.Equal(t, int64(9), st.GetDelivered().GetPosition().GetSeq())

	tb.doProto(t, http.MethodPost, "/v1/users/carol/channels/c2/read", `{"seq": "3"}`, &mr)

	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/carol/read-state?channel_id=c1&channel_id=nope", "", &rs)
	require.Equal(t, "carol", rs.GetUserId())
	require.Len(t, rs.GetChannels(), 1)
	require.Equal(t, "c1", rs.GetChannels()[0].GetChannelId())
	require.Equal(t, int64(7), rs.GetChannels()[0].GetRead().GetPosition().GetSeq())
	require.Equal(t, "m7", rs.GetChannels()[0].GetRead().GetMessageId())
	require.Equal(t, int64(9), rs.GetChannels()[0].GetDelivered().GetPosition().GetSeq())

	tb.doProto(t, http.MethodGet, "/v1/users/carol/read-state", "", &rs)
	require.Len(t, rs.GetChannels(), 2)
	require.Equal(t, "c1", rs.GetChannels()[0].GetChannelId())
	require.Equal(t, "c2", rs.GetChannels()[1].GetChannelId())
	require.Equal(t, int64(3), rs.GetChannels()[1].GetRead().GetPosition().GetSeq())

	// Kafka orders records within a partition only: compare as a multiset.
	_, states := tb.consume(t, 3)
	keys := map[string]int{}
	for _, st := range states {
		keys[st.Key.KafkaKey()]++
	}
	require.Equal(t, map[string]int{"carol:c1": 2, "carol:c2": 1}, keys)
}

func TestGRPCAndConnectOnSamePort(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()

	grpcClient := tb.client(connect.WithGRPC())
	resp, err := grpcClient.MarkReceipts(ctx, connect.NewRequest(&receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
		{UserId: "dave", ChannelId: "c1", Kind: receiptsv1.Kind_READ, Seq: 5},
		{UserId: "dave", ChannelId: "c2", Kind: receiptsv1.Kind_DELIVERED, Seq: 6},
	}}))
	require.NoError(t, err)
	require.Len(t, resp.Msg.GetResults(), 2)
	require.Equal(t, int64(5), resp.Msg.GetResults()[0].GetState().GetRead().GetPosition().GetSeq())
	require.Equal(t, receiptsv1.Durability_KAFKA, resp.Msg.GetResults()[1].GetDurability())

	// Connect protocol (HTTP/1.1 works too) and gRPC-Web.
	for name, c := range map[string]interface {
		MarkRead(context.Context, *connect.Request[receiptsv1.MarkRequest]) (*connect.Response[receiptsv1.MarkResponse], error)
	}{
		"connect":  tb.client(),
		"grpc-web": tb.client(connect.WithGRPCWeb()),
	} {
		mr, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "dave", ChannelId: "c9", Seq: 1}))
		require.NoError(t, err, name)
		require.Equal(t, receiptsv1.Durability_KAFKA, mr.Msg.GetResult().GetDurability(), name)
	}

	// Connect unary JSON as curl sends it, without Connect-Protocol-Version.
	var mr receiptsv1.MarkResponse
	tb.doProto(t, http.MethodPost, "/receipts.v1.ReceiptService/MarkRead", `{"user_id": "dave", "channel_id": "c8", "seq": 2}`, &mr)
	require.Equal(t, int64(2), mr.GetResult().GetState().GetRead().GetPosition().GetSeq())

	rs, err := grpcClient.GetReadState(ctx, connect.NewRequest(&receiptsv1.GetReadStateRequest{UserId: "dave", ChannelId: []string{"c2"}}))
	require.NoError(t, err)
	require.Len(t, rs.Msg.GetChannels(), 1)
	require.Equal(t, int64(6), rs.Msg.GetChannels()[0].GetDelivered().GetPosition().GetSeq())

	tb.consume(t, 5)

	// Reflection lists the service on the same port.
	rc := grpcreflect.NewClient(tb.h2c, tb.url)
	stream := rc.NewStream(ctx)
	names, err := stream.ListServices()
	require.NoError(t, err)
	_, _ = stream.Close()
	require.Contains(t, names, protoreflect.FullName("receipts.v1.ReceiptService"))
	require.Contains(t, names, protoreflect.FullName("grpc.health.v1.Health"))

	require.NoError(t, tb.server.Ready(ctx))
}
