package gate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gate"
	"github.com/readstate/receipts/pkg/gate/server"
)

// markBody builds a MarkReceipts JSON body from receipt objects.
func markBody(items ...string) string { return `{"receipts": [` + strings.Join(items, ",") + `]}` }

// item builds one receipt object with a raw JSON user id.
func item(userJSON string, seq int) string {
	return fmt.Sprintf(`{"user_id": %s, "channel_id": "c", "kind": "READ", "seq": %d}`, userJSON, seq)
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ok := item(`"u"`, 1)
	long := strings.Repeat("x", 129)
	many := make([]string, gate.MaxBatchItemsDefault+1)
	for i := range many {
		many[i] = ok
	}
	manyChannels := strings.Repeat("channel_id=c&", gate.MaxReadChannelsDefault+1)

	cases := []struct {
		name, method, path, body string
		status                   int
		code                     connect.Code
		reason                   apierr.Reason
		msg                      string // the message contains it
	}{
		{"missing user_id", "POST", "/v1/receipts:mark", markBody(ok, `{"channel_id": "c", "kind": "READ", "seq": 1}`),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[1].user_id: is required"},
		{"over-long id", "POST", "/v1/receipts:mark", markBody(item(`"`+long+`"`, 1)),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[0].user_id: is 129 bytes long; the limit is 128"},
		{"control character", "POST", "/v1/receipts:mark", markBody(ok, ok, `{"user_id": "u", "channel_id": "a\u0007b", "kind": "READ", "seq": 1}`),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[2].channel_id: contains a control or non-printable character at byte 1"},
		{"whitespace in id", "POST", "/v1/receipts:mark", markBody(ok, ok, ok, item(`"@us er:x.org"`, 1)),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[3].user_id: contains whitespace at byte 3"},
		{"leading colon in id", "POST", "/v1/receipts:mark", markBody(ok, item(`":loaded"`, 1)),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[1].user_id: starts with ':'"},
		{"brace in channel id", "POST", "/v1/receipts:mark", markBody(ok, `{"user_id": "u", "channel_id": "a{b}", "kind": "READ", "seq": 1}`),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[1].channel_id: contains '{' at byte 1"},
		{"brace in user id (single mark)", "POST", "/v1/receipts:mark", markBody(item(`"u}"`, 1)),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[0].user_id: contains '}' at byte 1"},
		{"tab in message id", "POST", "/v1/receipts:mark", markBody(`{"user_id": "u", "channel_id": "c", "kind": "READ", "seq": 1, "message_id": "$m:1\tx"}`),
			400, connect.CodeInvalidArgument, apierr.InvalidID, "receipts[0].message_id: contains whitespace at byte 4"},
		{"seq 0", "POST", "/v1/receipts:mark", markBody(item(`"u"`, 0)),
			400, connect.CodeInvalidArgument, apierr.InvalidSeq, "receipts[0].seq: must be between 1 and 9007199254740991, got 0"},
		{"negative seq", "POST", "/v1/receipts:mark", markBody(item(`"u"`, -5)),
			400, connect.CodeInvalidArgument, apierr.InvalidSeq, "receipts[0].seq: must be between 1 and 9007199254740991, got -5"},
		{"missing kind", "POST", "/v1/receipts:mark", markBody(`{"user_id": "u", "channel_id": "c", "seq": 1}`),
			400, connect.CodeInvalidArgument, apierr.InvalidKind, "receipts[0].kind: is missing or unknown; use READ or DELIVERED"},
		{"unknown kind number", "POST", "/v1/receipts:mark", markBody(`{"user_id": "u", "channel_id": "c", "kind": 7, "seq": 1}`),
			400, connect.CodeInvalidArgument, apierr.InvalidKind, "receipts[0].kind: must be READ or DELIVERED, got 7"},
		// The JSON codec discards unknown names (forward compatibility), so
		// an unknown kind name arrives as unset.
		{"unknown kind name", "POST", "/v1/receipts:mark", markBody(`{"user_id": "u", "channel_id": "c", "kind": "SEEN", "seq": 1}`),
			400, connect.CodeInvalidArgument, apierr.InvalidKind, "receipts[0].kind: is missing or unknown; use READ or DELIVERED"},
		{"empty batch", "POST", "/v1/receipts:mark", `{"receipts": []}`,
			400, connect.CodeInvalidArgument, apierr.EmptyRequest, "receipts: must not be empty"},
		{"too many items", "POST", "/v1/receipts:mark", markBody(many...),
			400, connect.CodeInvalidArgument, apierr.BatchTooLarge, "receipts: has 501 items; the limit is 500"},
		{"malformed JSON", "POST", "/v1/receipts:mark", `{"receipts": [{"user_id": "u",`,
			400, connect.CodeInvalidArgument, apierr.MalformedRequest, "request body is not valid JSON: unexpected end of JSON input"},
		// Refused by the REST transcoder before the service sees them.
		{"fractional seq", "POST", "/v1/receipts:mark", markBody(`{"user_id": "u", "channel_id": "c", "kind": "READ", "seq": 1.5}`),
			400, connect.CodeInvalidArgument, apierr.MalformedRequest, "invalid value for int64 field seq: 1.5"},
		{"seq not a number", "POST", "/v1/receipts:mark", markBody(`{"user_id": "u", "channel_id": "c", "kind": "READ", "seq": "x"}`),
			400, connect.CodeInvalidArgument, apierr.MalformedRequest, "invalid value for int64 field seq"},
		{"body over the limit", "POST", "/v1/receipts:mark", `{"receipts": [], "pad": "` + strings.Repeat("x", server.MaxBodyBytesDefault) + `"}`,
			413, connect.CodeResourceExhausted, apierr.BodyTooLarge, "request body is larger than the limit of 1048576 bytes"},
		{"single: brace in path id", "POST", "/v1/users/%40a%3Ab%7B/channels/c/read", `{"seq": 1}`,
			400, connect.CodeInvalidArgument, apierr.InvalidID, "user_id: contains '{' at byte 4"},
		{"single: escaped space in path id", "POST", "/v1/users/u/channels/%21a%20b/read", `{"seq": 1}`,
			400, connect.CodeInvalidArgument, apierr.InvalidID, "channel_id: contains whitespace at byte 2"},
		{"single: seq 0", "POST", "/v1/users/u/channels/c/delivered", `{"seq": 0}`,
			400, connect.CodeInvalidArgument, apierr.InvalidSeq, "seq: must be between 1 and 9007199254740991, got 0"},
		{"single: bad device id", "POST", "/v1/users/u/channels/c/read", `{"seq": 1, "device_id": "my phone"}`,
			400, connect.CodeInvalidArgument, apierr.InvalidID, "device_id: contains whitespace at byte 2"},
		{"read: bad channel id", "GET", "/v1/users/u/read-state?channel_id=x%3Ay&channel_id=x%7By", "",
			400, connect.CodeInvalidArgument, apierr.InvalidID, "channel_id[1]: contains '{' at byte 1"},
		{"read: too many channels", "GET", "/v1/users/u/read-state?" + manyChannels, "",
			400, connect.CodeInvalidArgument, apierr.BatchTooLarge, "channel_id: has 501 ids; the limit is 500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := tb.do(t, c.method, c.path, c.body)
			apierrtest.RefusedREST(t, status, body, c.status, c.reason)
			e := parseRESTError(t, body)
			require.Equal(t, int(c.code), e.Code, "body: %.300s", body)
			require.Contains(t, e.Message, c.msg)
		})
	}

	// The same checks over gRPC, including the message limit.
	ctx := context.Background()
	grpc := tb.client(connect.WithGRPC())
	_, err := grpc.MarkReceipts(ctx, connect.NewRequest(&receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
		{UserId: "u", ChannelId: "c", Kind: receiptsv1.Kind_READ, Seq: 1},
		{UserId: "u", ChannelId: "c", Kind: receiptsv1.Kind_DELIVERED, Seq: -1},
	}}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidSeq)
	require.Equal(t, "receipts[1].seq", apierr.InfoOf(err).GetMetadata()["field"])
	require.Equal(t, "receipts[1].seq: must be between 1 and 9007199254740991, got -1", connectMessage(err))
	_, err = grpc.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{ChannelId: "c", Seq: 1}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidID)
	require.Equal(t, "user_id: is required", connectMessage(err))
	_, err = grpc.MarkReceipts(ctx, connect.NewRequest(&receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{
		{UserId: strings.Repeat("u", 128), ChannelId: strings.Repeat("c", server.MaxBodyBytesDefault), Kind: receiptsv1.Kind_READ, Seq: 1},
	}}))
	// connect refuses the oversized message before the service sees it:
	// the code alone, no reason.
	apierrtest.Refused(t, err, connect.CodeResourceExhausted, "")

	// Nothing reached Redis or Kafka.
	require.Empty(t, tb.redisKeys(t))
	require.Zero(t, tb.highWatermarks(t))
	require.Zero(t, tb.metric(t, "receipts_kafkagate_events_total", "outcome", "kafka"))
	// 15 REST batches and 1 gRPC batch reached the handler; malformed and
	// oversize requests are rejected before it.
	require.Equal(t, 16.0, tb.metric(t, "receipts_kafkagate_requests_total", "rpc", "MarkReceipts", "code", "invalid_argument"))
}

// connectMessage is the error message without the code prefix.
func connectMessage(err error) string {
	if ce, ok := err.(*connect.Error); ok {
		return ce.Message()
	}
	return err.Error()
}
