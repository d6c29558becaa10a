package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
)

// A small group: the sender's notice, members' reads and deliveries, a
// user hiding reads. Read-by lists who reached the message (sender left
// out, the hidden reader pending), ticks give the least shared cursor;
// after the view keys are lost the answers are rebuilt from Postgres' side
// (here: the membership and the live marks since).
func TestReadByTicksAndSettings(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, u := range []string{"s", "a", "b", "h"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/g/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPut, "/v1/users/h/settings", `{"share_read_receipts": false}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var st receiptsv1.UserSettings
	tb.doProto(t, http.MethodGet, "/v1/users/h/settings", "", &st)
	require.False(t, st.ShareReadReceipts)
	require.True(t, st.ShareDeliveryReceipts)
	require.Positive(t, st.VersionUnixMs)

	status, body = tb.do(t, http.MethodPost, "/v1/channels/g/messages", `{"seq": 3, "message_id": "m3", "sender_id": "s"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(
		`{"user_id": "a", "channel_id": "g", "kind": "READ", "seq": 3}`,
		`{"user_id": "b", "channel_id": "g", "kind": "DELIVERED", "seq": 3}`,
		`{"user_id": "h", "channel_id": "g", "kind": "READ", "seq": 3}`,
	), &mr)

	var rec receiptsv1.MessageReceipts
	tb.doProto(t, http.MethodGet, "/v1/channels/g/messages/3/receipts?sender_id=s", "", &rec)
	require.True(t, rec.Detailed)
	require.Equal(t, int64(4), rec.MemberCount)
	require.Equal(t, []string{"a"}, userIDs(rec.ReadBy), "the hidden reader never appears in read-by")
	require.Equal(t, []string{"a", "b", "h"}, userIDs(rec.DeliveredTo))
	require.Equal(t, []string{"b", "h"}, rec.Pending)
	for _, m := range rec.ReadBy {
		require.Positive(t, m.AtUnixMs)
	}

	var ticks receiptsv1.ChannelTicks
	tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
	require.Equal(t, int64(3), ticks.DeliveredToAllUpTo, "every member received 3 (the sender by the notice)")
	require.Equal(t, int64(0), ticks.ReadByAllUpTo, "b has not read")
	require.Len(t, ticks.Members, 4)
	for _, m := range ticks.Members {
		if m.UserId == "h" {
			require.Nil(t, m.Read, "a hidden read is not in the ticks")
		}
	}

	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(`{"user_id": "b", "channel_id": "g", "kind": "READ", "seq": 3}`), &mr)
	tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
	require.Equal(t, int64(3), ticks.ReadByAllUpTo, "the hidden reader is skipped by the read watermark")

	var lk receiptsv1.LookupReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:lookup", `{"messages": [{"channel_id": "g", "seq": 3, "sender_id": "s"}, {"channel_id": "g", "seq": 4}], "badge_user_ids": ["a"]}`, &lk)
	require.Len(t, lk.Messages, 2)
	require.Equal(t, []string{"a", "b"}, userIDs(lk.Messages[0].ReadBy))
	require.Empty(t, lk.Messages[1].ReadBy)
	require.Len(t, lk.Badges, 1)

	// Bad input: a clear reason, nothing written.
	status, body = tb.do(t, http.MethodGet, "/v1/channels/g/messages/0/receipts", "")
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.InvalidSeq)
	require.Equal(t, "seq", apierr.InfoOfREST(body).GetMetadata()["field"])
	items := ""
	for i := range 501 {
		if i > 0 {
			items += ","
		}
		items += fmt.Sprintf(`{"channel_id": "g", "seq": %d}`, i+1)
	}
	status, body = tb.do(t, http.MethodPost, "/v1/receipts:lookup", `{"messages": [`+items+`]}`)
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.BatchTooLarge)
	require.Equal(t, map[string]string{"field": "messages", "limit": "500"}, apierr.InfoOfREST(body).GetMetadata())
	require.Contains(t, string(body), "the limit is 500")
	status, body = tb.do(t, http.MethodPut, "/v1/users/h/settings", `{}`)
	apierrtest.RefusedREST(t, status, body, http.StatusBadRequest, apierr.EmptyRequest)
}

func userIDs(ms []*receiptsv1.MemberAt) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.UserId)
	}
	return out
}

// Ticks keep the channel's head when Redis lost it: read from Postgres
// (here written directly: no persister runs) and put back into Redis; a
// channel without a head has none in its ticks, before and after Redis
// records that it has none.
func TestTicksHeadFallsBackToPostgres(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	status, body := tb.do(t, http.MethodPost, "/v1/channels/g/messages", `{"seq": 3, "message_id": "m3", "sender_id": "s"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var ticks receiptsv1.ChannelTicks
	tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
	require.Equal(t, int64(3), ticks.GetHead().GetSeq())

	_, err := heads.NewStore(tb.schema.Store, nil).WritePG(ctx, []channel.Head{{Channel: "g", Seq: 3, MessageID: "m3", UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	require.NoError(t, tb.rdb.Del(ctx, heads.NewStore(nil, tb.store).RedisKey("g")).Err())
	ticks.Reset()
	tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
	require.Equal(t, int64(3), ticks.GetHead().GetSeq(), "the head from Postgres")
	got, err := heads.NewStore(nil, tb.store).ReadRedis(ctx, []string{"g"})
	require.NoError(t, err)
	require.Equal(t, int64(3), got["g"].Seq, "and back in Redis")

	for range 2 {
		ticks.Reset()
		tb.doProto(t, http.MethodGet, "/v1/channels/none/ticks", "", &ticks)
		require.Nil(t, ticks.Head, "a channel without a notice has no head")
	}
	got, err = heads.NewStore(nil, tb.store).ReadRedis(ctx, []string{"none"})
	require.NoError(t, err)
	require.Contains(t, got, "none", "Redis records that it has none")
}

// A member who leaves and joins again is back in read-by and ticks with
// the cursors they held, though the join point (the head, already read)
// moves no cursor.
func TestRejoinedMemberShowsAgain(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, u := range []string{"s", "a"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/g/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPost, "/v1/channels/g/messages", `{"seq": 3, "message_id": "m3", "sender_id": "s"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var mr receiptsv1.MarkReceiptsResponse
	tb.doProto(t, http.MethodPost, "/v1/receipts:mark", markBody(`{"user_id": "a", "channel_id": "g", "kind": "READ", "seq": 3}`), &mr)
	status, body = tb.do(t, http.MethodDelete, "/v1/channels/g/members/a", ``)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var rec receiptsv1.MessageReceipts
	tb.doProto(t, http.MethodGet, "/v1/channels/g/messages/3/receipts?sender_id=s", "", &rec)
	require.Empty(t, rec.ReadBy, "a left")

	status, body = tb.do(t, http.MethodPut, "/v1/channels/g/members/a", `{}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	rec.Reset()
	tb.doProto(t, http.MethodGet, "/v1/channels/g/messages/3/receipts?sender_id=s", "", &rec)
	require.Equal(t, []string{"a"}, userIDs(rec.ReadBy), "a is back")
	require.Equal(t, []string{"a"}, userIDs(rec.DeliveredTo))
	var ticks receiptsv1.ChannelTicks
	tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
	require.Equal(t, int64(3), ticks.ReadByAllUpTo)
	require.Equal(t, int64(3), ticks.DeliveredToAllUpTo)
}

// A view rebuilt from Postgres between an erasure and the persister
// applying it does not bring the erased user's rows back into Redis.
func TestViewRebuildSkipsErasedUser(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()
	for _, u := range []string{"s", "a"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/g/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPost, "/v1/channels/g/messages", `{"seq": 3, "message_id": "m3", "sender_id": "s"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	before := time.Now().UnixMilli()
	// What the persister wrote before the erasure (no persister runs here).
	for _, u := range []string{"s", "a"} {
		k := receipt.Key{User: u, Channel: "g"}
		_, err := cursors.NewPostgres(tb.schema.Store).Upsert(ctx, []receipt.State{{Key: k, Read: receipt.Cursor{Position: receipt.Position{Seq: 3}},
			Delivered: receipt.Cursor{Position: receipt.Position{Seq: 3}}, UpdatedAtUnixMs: before}})
		require.NoError(t, err)
		_, err = members.NewStore(tb.schema.Store, nil).WritePG(ctx, []channel.Membership{channel.Join(k, 0, before, 0)})
		require.NoError(t, err)
	}
	status, body = tb.do(t, http.MethodDelete, "/v1/users/a", ``)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.NoError(t, tb.rdb.Del(ctx, readby.NewStore(nil, tb.store).LoadedKey("g")).Err())

	var ticks receiptsv1.ChannelTicks
	tb.doProto(t, http.MethodGet, "/v1/channels/g/ticks", "", &ticks)
	views, err := readby.NewStore(nil, tb.store).ReadAll(ctx, []string{"g"})
	require.NoError(t, err)
	require.True(t, views[0].Loaded, "the view was rebuilt")
	require.Contains(t, views[0].Read, "s")
	require.NotContains(t, views[0].Read, "a", "the erased user's row stays out of the view")
	require.NotContains(t, views[0].Delivered, "a")
}

// A move published under a user's old settings while they turn sharing
// off (a mark in flight on another replica) is gone from the view by the
// time the settings call returns.
func TestHidingSettlesInFlightViewMoves(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	for _, u := range []string{"s", "h"} {
		status, body := tb.do(t, http.MethodPut, "/v1/channels/g/members/"+u, `{}`)
		require.Equal(t, http.StatusOK, status, "join %s: %s", u, body)
	}
	status, body := tb.do(t, http.MethodPost, "/v1/channels/g/messages", `{"seq": 3, "message_id": "m3", "sender_id": "s"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = tb.do(t, http.MethodPost, "/v1/users/h/channels/g/read", `{"seq": 2}`)
	require.Equal(t, http.StatusOK, status, "%s", body)

	done := make(chan struct{})
	go func() {
		defer close(done)
		status, body := tb.do(t, http.MethodPut, "/v1/users/h/settings", `{"share_read_receipts": false}`)
		require.Equal(t, http.StatusOK, status, "%s", body)
	}()
	// The stale flush: it read "shares reads" before the change and
	// publishes h's read after the change was applied to the views.
	ctx := context.Background()
	require.Eventually(t, func() bool {
		v, err := readby.NewStore(nil, tb.store).ReadAll(ctx, []string{"g"})
		require.NoError(t, err)
		_, shown := v[0].Read["h"]
		return !shown
	}, 5*time.Second, 5*time.Millisecond, "the change hides h's read")
	_, err := readby.NewStore(nil, tb.store).Apply(ctx, []readby.Move{{Channel: "g", User: "h", Side: readby.Read,
		Position: receipt.Position{Seq: 3}, AtUnixMs: time.Now().UnixMilli()}}, 100)
	require.NoError(t, err)
	<-done
	v, err := readby.NewStore(nil, tb.store).ReadAll(ctx, []string{"g"})
	require.NoError(t, err)
	require.NotContains(t, v[0].Read, "h", "a move published under the old settings is hidden once the call returns")
}
