package notifications

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Postgres keeps the greater register of a key (a stale one changes no
// row), reads a user's registers in channel order, walks every key in
// (user, channel) order, and an erasure deletes the user's registers only,
// by the kind's statement in the driver's transaction.
func TestPostgresMergesReadsWalksAndErases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	s := NewStore(pg, nil)
	reg := func(user, ch string, l notification.Level, v int64) notification.Register {
		return notification.Register{Key: receipt.Key{User: user, Channel: ch}, Level: l, VersionUnixMs: v}
	}
	n, err := s.WritePG(ctx, []notification.Register{reg("u", "c2", notification.All, 5), reg("u", "c1", notification.All, 5), reg("v", "c1", notification.Mentions, 1)})
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	n, err = s.WritePG(ctx, []notification.Register{reg("u", "c2", notification.None, 4), reg("u", "c1", notification.Mentions, 5)})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "an older version changes nothing; at the same version the greater (quieter) level wins")

	want := []notification.Register{reg("u", "c1", notification.Mentions, 5), reg("u", "c2", notification.All, 5)}
	got, err := s.ReadPG(ctx, "u", nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = s.ReadPG(ctx, "u", []string{"c2", "c9"})
	require.NoError(t, err)
	require.Equal(t, want[1:], got)
	got, err = s.PagePG(ctx, receipt.Key{User: "u", Channel: "c1"}, 10)
	require.NoError(t, err)
	require.Equal(t, []notification.Register{want[1], reg("v", "c1", notification.Mentions, 1)}, got)

	deleted, _, err := pg.Erase(ctx, tombstone.Tombstone{User: "u", Generation: 1, ErasedAtUnixMs: 1}, kind.PGErasure([]kind.Kind{Kind}))
	require.NoError(t, err)
	require.EqualValues(t, 2, deleted)
	got, err = s.ReadPG(ctx, "u", nil)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = s.ReadPG(ctx, "v", nil)
	require.NoError(t, err)
	require.Len(t, got, 1, "another user's register stays")
}
