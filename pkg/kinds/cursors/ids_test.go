package cursors_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Ids may hold ':' (Matrix ids), '%', '/' and '#': every key names them
// inside its hash tag, every field and member is the bare id, and the
// sweeps find ids in key names by the braces, so each id reads back whole
// wherever it is stored, and erasure finds every trace (the membership
// hashes' part: pkg/kinds/members).
func TestMatrixIDsEverywhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := redisstore.New(rdb, redisstore.Config{Prefix: redistest.Prefix(t, rdb)})
	require.NoError(t, s.Load(ctx))
	const (
		alice = "@alice:example.org"
		bob   = "urn:tenant:b%2F/#b"
		room  = "!room:example.org"
		other = "tenant:c/1%"
	)

	st := mark(alice, room, 0, 7, "$ev7:example.org", true)
	st.DeviceID = "dev:1"
	_, err := cursors.NewStore(s).Merge(ctx, []receipt.State{st, mark(alice, other, 0, 3, "m:3", false), mark(bob, room, 0, 2, "%m", true)})
	require.NoError(t, err)
	got, _, err := cursors.NewStore(s).Get(ctx, alice, nil)
	require.NoError(t, err)
	slices.SortFunc(got, receipt.CompareStates)
	require.Len(t, got, 2)
	require.True(t, got[0].SameCursors(st), "%+v", got[0])
	require.Equal(t, "dev:1", got[0].DeviceID)
	require.Equal(t, receipt.Key{User: alice, Channel: other}, got[1].Key)

	cursors.PutHeads(t, cursors.NewStore(s), channel.Head{Channel: room, Seq: 9, MessageID: "$ev9:example.org"})
	_, err = readby.NewStore(nil, s).Apply(ctx, []readby.Move{
		{Channel: room, User: alice, Side: readby.Read, Position: receipt.Position{Seq: 7}, AtUnixMs: 5},
		{Channel: room, User: bob, Side: readby.Delivered, Position: receipt.Position{Seq: 2}, AtUnixMs: 5},
	}, 0)
	require.NoError(t, err)
	views, err := readby.NewStore(nil, s).ReadAll(ctx, []string{room})
	require.NoError(t, err)
	require.Equal(t, int64(7), views[0].Read[alice].Position.Seq)
	require.Equal(t, int64(2), views[0].Delivered[bob].Position.Seq)

	// The sweeps' scans give the ids whole. Every page is read: the
	// database is shared with other tests, so one page may hold none of
	// this test's keys.
	scanAll := func(scan func(context.Context, redisstore.ScanCursor, int64) ([]string, redisstore.ScanCursor, error)) []string {
		var all []string
		for cur := (redisstore.ScanCursor{}); !cur.Done(); {
			var page []string
			page, cur, err = scan(ctx, cur, 1000)
			require.NoError(t, err)
			all = append(all, page...)
		}
		return all
	}
	require.ElementsMatch(t, []string{alice, bob}, scanAll(cursors.NewStore(s).ScanUsers))
	require.Equal(t, []string{room}, scanAll(func(ctx context.Context, cur redisstore.ScanCursor, n int64) ([]string, redisstore.ScanCursor, error) {
		return s.ScanTagged(ctx, "hd:", cur, n)
	}))

	// Erasure finds the user's channels in the user's hashes' fields and
	// takes the user out of each channel's hashes, sets and stream.
	ts, err := s.Erase(ctx, alice, 100, 0, cursors.ErasedHashes(s, alice), readby.NewStore(nil, s).Redact(100, nil))
	require.NoError(t, err)
	require.Equal(t, alice, ts.User)
	got, complete, err := cursors.NewStore(s).Get(ctx, alice, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	require.True(t, complete)
	views, err = readby.NewStore(nil, s).ReadAll(ctx, []string{room})
	require.NoError(t, err)
	require.NotContains(t, views[0].Read, alice)
	require.Contains(t, views[0].Delivered, bob)
	got, _, err = cursors.NewStore(s).Get(ctx, bob, nil)
	require.NoError(t, err)
	require.Len(t, got, 1, "another user's state stays")
}
