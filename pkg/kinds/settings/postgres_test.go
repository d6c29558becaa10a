package settings

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Postgres keeps the greater register of a user (a stale one or a tie
// that shares more changes no row), reads the defaults for a user
// without a row, walks every row in user order, and an erasure deletes
// the user's row only, by the kind's statement in the driver's
// transaction.
func TestPostgresMergesReadsWalksAndErases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgtest.NewSchema(t).Store
	s := NewStore(pg, nil)
	hidden := privacy.Settings{User: "u", ShareRead: false, ShareDelivered: true, VersionMs: 5}
	v := privacy.Settings{User: "v", ShareRead: true, ShareDelivered: true, VersionMs: 1, DefaultLevel: notification.Mentions}
	n, err := s.WritePG(ctx, []privacy.Settings{hidden, v})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = s.WritePG(ctx, []privacy.Settings{{User: "u", ShareRead: true, ShareDelivered: true, VersionMs: 5}})
	require.NoError(t, err)
	require.Zero(t, n, "a tie that shares more changes nothing")
	quieter := privacy.Settings{User: "v", ShareRead: true, ShareDelivered: true, VersionMs: 1, DefaultLevel: notification.None}
	n, err = s.WritePG(ctx, []privacy.Settings{quieter})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "a tie: the quieter level wins")

	got, err := s.ReadPG(ctx, []string{"v", "none", "u"})
	require.NoError(t, err)
	require.Equal(t, []privacy.Settings{quieter, privacy.Default("none"), hidden}, got)
	stored, err := s.StoredPG(ctx, []string{"u", "none"})
	require.NoError(t, err)
	require.Equal(t, map[string]privacy.Settings{"u": hidden}, stored)
	page, err := s.PagePG(ctx, "", 10)
	require.NoError(t, err)
	require.Equal(t, []privacy.Settings{hidden, quieter}, page)
	page, err = s.PagePG(ctx, "u", 10)
	require.NoError(t, err)
	require.Equal(t, []privacy.Settings{quieter}, page, "after u")

	deleted, _, err := pg.Erase(ctx, tombstone.Tombstone{User: "u", Generation: 1, ErasedAtUnixMs: 1}, kind.PGErasure([]kind.Kind{Kind}))
	require.NoError(t, err)
	require.EqualValues(t, 1, deleted)
	stored, err = s.StoredPG(ctx, []string{"u", "v"})
	require.NoError(t, err)
	require.Equal(t, map[string]privacy.Settings{"v": quieter}, stored)
}
