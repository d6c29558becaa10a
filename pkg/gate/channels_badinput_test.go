package gate_test

import (
	"context"

	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gate"
)

// TestChannelBadInputWritesNothing sends malformed notices, joins, reads
// and marks to the channel routes: each is refused with its reason, and
// nothing reaches Kafka (so nothing can reach Postgres, which only the
// persister writes, from Kafka), Redis or Postgres.
func TestChannelBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	notice := func(extra string) string { return `{"seq": 1, "sender_id": "u"` + extra + `}` }
	tooMany := `"` + strings.Repeat(`u","`, gate.MaxMentions) + `u"`
	notices := make([]string, gate.MaxNotices+1)
	for i := range notices {
		notices[i] = `{"channel_id": "c", "seq": 1}`
	}
	many := strings.Repeat("channel_id=c&", gate.MaxUnreadChannelsDefault+1)

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		reason                   apierr.Reason
		msg                      string
	}{
		{"notice: seq 0", "POST", "/v1/channels/c/messages", `{"seq": 0}`, 400, apierr.InvalidSeq, "seq: must be between 1 and 9007199254740991, got 0"},
		{"notice: bad channel", "POST", "/v1/channels/%21a%3Ab%7D/messages", notice(""), 400, apierr.InvalidID, "channel_id: contains '}' at byte 4"},
		{"notice: bad sender", "POST", "/v1/channels/c/messages", `{"seq": 1, "sender_id": "s s"}`, 400, apierr.InvalidID, "sender_id: contains whitespace at byte 1"},
		{"notice: bad message id", "POST", "/v1/channels/c/messages", `{"seq": 1, "message_id": "$m:1\u0000"}`, 400, apierr.InvalidID, "message_id: contains a control or non-printable character at byte 4"},
		{"notice: bad mention", "POST", "/v1/channels/c/messages", notice(`, "mentions": ["@ok:x", ":y"]`), 400, apierr.InvalidID, "mentions[1]: starts with ':'"},
		{"notice: too many mentions", "POST", "/v1/channels/c/messages", notice(`, "mentions": [` + tooMany + `]`), 400, apierr.BatchTooLarge, "mentions: has 1001 users; the limit is 1000"},
		{"notice: malformed JSON", "POST", "/v1/channels/c/messages", `{"seq": `, 400, apierr.MalformedRequest, "request body is not valid JSON: unexpected end of JSON input"},
		{"read: malformed JSON", "POST", "/v1/users/u/channels/c/read", `{"seq": `, 400, apierr.MalformedRequest, "request body is not valid JSON: unexpected end of JSON input"},
		{"notices: empty", "POST", "/v1/messages:notify", `{"notices": []}`, 400, apierr.EmptyRequest, "notices: must not be empty"},
		{"notices: too many", "POST", "/v1/messages:notify", `{"notices": [` + strings.Join(notices, ",") + `]}`, 400, apierr.BatchTooLarge, "notices: has 501 items; the limit is 500"},
		{"notices: one bad", "POST", "/v1/messages:notify", `{"notices": [{"channel_id": "c", "seq": 1}, {"channel_id": "c", "seq": -2}]}`, 400, apierr.InvalidSeq, "notices[1].seq: must be between 1 and 9007199254740991, got -2"},
		{"join: bad user", "PUT", "/v1/channels/c/members/a%20b", `{}`, 400, apierr.InvalidID, "user_id: contains whitespace at byte 1"},
		{"join: negative seq", "PUT", "/v1/channels/c/members/u", `{"seq": -1}`, 400, apierr.InvalidSeq, "seq: must be between 0 and 9007199254740991, got -1"},
		{"leave: bad channel", "DELETE", "/v1/channels/c%09/members/u", ``, 400, apierr.InvalidID, "channel_id: contains whitespace at byte 1"},
		{"channel: page size", "GET", "/v1/channels/c?page_size=1001", ``, 400, apierr.InvalidField, "page_size: must be within [1, 1000], got 1001"},
		{"channel: bad token", "GET", "/v1/channels/c?page_token=%21%21", ``, 400, apierr.InvalidField, "page_token: is not a token this service issued"},
		{"unread: bad user", "GET", "/v1/users/@a:b%7B/unread", ``, 400, apierr.InvalidID, "user_id: contains '{' at byte 4"},
		{"unread: long user", "GET", "/v1/users/" + strings.Repeat("%3A", 129) + "/unread", ``, 400, apierr.InvalidID, "user_id: is 129 bytes long; the limit is 128"},
		{"unread: too many channels", "GET", "/v1/users/u/unread?" + many, ``, 400, apierr.BatchTooLarge, "channel_id: has 1001 ids; the limit is 1000"},
		{"unread: bad channel", "GET", "/v1/users/u/unread?channel_id=x%3Ay&channel_id=x%0Ay", ``, 400, apierr.InvalidID, "channel_id[1]: contains whitespace at byte 1"},
		{"mark unread: seq 0", "POST", "/v1/users/u/channels/c/unread", `{"seq": 0}`, 400, apierr.InvalidSeq, "seq: must be between 1 and 9007199254740991, got 0"},
		{"read all: too many", "POST", "/v1/users/u/read-all", `{"channel_id": [` + strings.Repeat(`"c",`, gate.MaxUnreadChannelsDefault) + `"c"]}`, 400, apierr.BatchTooLarge, "channel_id: has 1001 ids; the limit is 1000"},
		{"read all: bad device", "POST", "/v1/users/u/read-all", `{"device_id": "a b"}`, 400, apierr.InvalidID, "device_id: contains whitespace"},
		{"read: private delivered", "POST", "/v1/receipts:mark", `{"receipts": [{"user_id": "u", "channel_id": "c", "kind": "DELIVERED", "seq": 1, "private": true}]}`, 400, apierr.InvalidField, "receipts[0].private: applies to READ marks only"},
	} {
		status, body := tb.do(t, c.method, c.path, c.body)
		apierrtest.RefusedREST(t, status, body, c.status, c.reason, c.name)
		require.Contains(t, parseRESTError(t, body).Message, c.msg, c.name)
	}
	_, err := tb.client(connect.WithGRPC()).NotifyMessages(context.Background(), connect.NewRequest(&receiptsv1.NotifyMessagesRequest{
		Notices: []*receiptsv1.MessageNotice{{ChannelId: "c", Seq: 1, Mentions: []string{"a b"}}}}))
	apierrtest.Refused(t, err, connect.CodeInvalidArgument, apierr.InvalidID)
	require.Equal(t, "notices[0].mentions[0]", apierr.InfoOf(err).GetMetadata()["field"])
	require.Equal(t, "notices[0].mentions[0]: contains whitespace at byte 1", connectMessage(err))

	require.Empty(t, tb.redisKeys(t))
	require.Zero(t, tb.highWatermarks(t))
	requireNoRows(t, tb)
}

// requireNoRows checks that no table of the test's schema has a row.
func requireNoRows(t *testing.T, tb *testBundle) {
	t.Helper()
	for _, table := range []string{"read_receipts", "channel_heads", "channel_members", "mentions"} {
		var n int64
		require.NoError(t, tb.schema.Store.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
		require.Zero(t, n, table)
	}
}

// TestChannelRefusalsWriteNothing: the channel rules refuse a mark past
// the head or by a non-member without changing Redis (its keys and
// values), Kafka or Postgres.
func TestChannelRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	tb.memberChannel(t, "c", "alice", 3, "alice")
	ctx := context.Background()
	dump := func() map[string]string {
		out := map[string]string{}
		keys := tb.redisKeys(t)
		slices.Sort(keys)
		for _, k := range keys {
			v, err := tb.rdb.Dump(ctx, k).Result()
			require.NoError(t, err)
			out[k] = v
		}
		return out
	}
	before, hw := dump(), tb.highWatermarks(t)
	for _, c := range []struct {
		path, body string
		status     int
		reason     apierr.Reason
	}{
		{"/v1/users/alice/channels/c/read", `{"seq": 4}`, 409, apierr.HeadBehind},
		{"/v1/users/alice/channels/c/read", `{"seq": 4, "private": true}`, 409, apierr.HeadBehind},
		{"/v1/users/bob/channels/c/read", `{"seq": 1}`, 403, apierr.NotAMember},
		{"/v1/users/bob/channels/c/unread", `{"seq": 1}`, 403, apierr.NotAMember},
		{"/v1/receipts:mark", `{"receipts": [{"user_id": "alice", "channel_id": "c", "kind": "READ", "seq": 2}, {"user_id": "bob", "channel_id": "c", "kind": "READ", "seq": 1}]}`, 403, apierr.NotAMember},
	} {
		status, body := tb.do(t, http.MethodPost, c.path, c.body)
		apierrtest.RefusedREST(t, status, body, c.status, c.reason, "%s %s", c.path, c.body)
	}
	require.Equal(t, before, dump())
	require.Equal(t, hw, tb.highWatermarks(t))

}
