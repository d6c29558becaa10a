package gate_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

func TestReadFallsBackToPostgresAndHydrates(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()

	// Only Postgres knows erin (Redis lost her hash).
	_, err := cursors.NewPostgres(tb.schema.Store).Upsert(ctx, []receipt.State{
		{Key: receipt.Key{User: "erin", Channel: "c1"}, Read: receipt.Cursor{Position: pos(5), MessageID: "m5"}, Delivered: receipt.Cursor{Position: pos(6)}, UpdatedAtUnixMs: 1000},
		{Key: receipt.Key{User: "erin", Channel: "c2"}, Delivered: receipt.Cursor{Position: pos(8)}, UpdatedAtUnixMs: 1000},
	})
	require.NoError(t, err)

	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/erin/read-state?channel_id=c1", "", &rs)
	require.Len(t, rs.GetChannels(), 1)
	require.Equal(t, int64(5), rs.GetChannels()[0].GetRead().GetPosition().GetSeq())
	require.Equal(t, "m5", rs.GetChannels()[0].GetRead().GetMessageId())
	require.Equal(t, int64(6), rs.GetChannels()[0].GetDelivered().GetPosition().GetSeq())
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "incomplete"))

	// The whole user was hydrated, not only the asked channel, and the hash
	// is now complete: the next read is Redis only.
	cached, complete, err := cursors.NewStore(tb.store).Get(ctx, "erin", nil)
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, cached, 2)
	tb.doProto(t, http.MethodGet, "/v1/users/erin/read-state", "", &rs)
	require.Len(t, rs.GetChannels(), 2)
	require.Equal(t, "c2", rs.GetChannels()[1].GetChannelId())
	require.Equal(t, int64(8), rs.GetChannels()[1].GetDelivered().GetPosition().GetSeq())
	require.Equal(t, 1.0, tb.metric(t, "receipts_kafkagate_read_fallbacks_total", "reason", "incomplete"), "second read must not fall back")
}

func TestHydrateDoesNotUndoNewerRedisValue(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	ctx := context.Background()

	// Postgres is behind (the persister has not caught up) ...
	_, err := cursors.NewPostgres(tb.schema.Store).Upsert(ctx, []receipt.State{
		{Key: receipt.Key{User: "frank", Channel: "c1"}, Read: receipt.Cursor{Position: pos(5)}, Delivered: receipt.Cursor{Position: pos(5)}, UpdatedAtUnixMs: 1000},
		{Key: receipt.Key{User: "frank", Channel: "c2"}, Read: receipt.Cursor{Position: pos(4)}, Delivered: receipt.Cursor{Position: pos(4)}, UpdatedAtUnixMs: 1000},
	})
	require.NoError(t, err)
	// ... and a newer value is already in Redis (a repair's, which needs
	// no restore), hash not complete.
	_, err = cursors.NewStore(tb.store).Merge(ctx, []receipt.State{{Key: receipt.Key{User: "frank", Channel: "c1"}, Read: receipt.Cursor{Position: pos(9), MessageID: "m9"}, UpdatedAtUnixMs: 2000}})
	require.NoError(t, err)
	_, complete, err := cursors.NewStore(tb.store).Get(ctx, "frank", nil)
	require.NoError(t, err)
	require.False(t, complete)

	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/frank/read-state", "", &rs)
	require.Len(t, rs.GetChannels(), 2)
	require.Equal(t, int64(9), rs.GetChannels()[0].GetRead().GetPosition().GetSeq(), "answer is the max of Redis and Postgres")
	require.Equal(t, "m9", rs.GetChannels()[0].GetRead().GetMessageId())
	require.Equal(t, int64(4), rs.GetChannels()[1].GetRead().GetPosition().GetSeq())

	cached, complete, err := cursors.NewStore(tb.store).Get(ctx, "frank", []string{"c1", "c2"})
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, cached, 2)
	require.Equal(t, pos(9), cached[0].Read.Position, "hydrate kept the newer value")
	require.Equal(t, "m9", cached[0].Read.MessageID)
	require.Equal(t, pos(4), cached[1].Read.Position)
}

func TestReadOfUnknownUserIsEmptyAndCached(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	var rs receiptsv1.GetReadStateResponse
	tb.doProto(t, http.MethodGet, "/v1/users/nobody/read-state", "", &rs)
	require.Equal(t, "nobody", rs.GetUserId())
	require.Empty(t, rs.GetChannels())
	_, complete, err := cursors.NewStore(tb.store).Get(context.Background(), "nobody", nil)
	require.NoError(t, err)
	require.True(t, complete)
}
