package pgstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
)

// The cursor-move log keeps the moves of joined members of small
// channels only: not of a member who left, of a non-member, of an
// untracked channel or of a channel past the threshold, nor a kind the
// user hides, nor a move the log already holds (or one behind it); more
// moves than one statement holds go in several.
func TestInsertMovesKeepsSmallChannelsMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgtest.NewSchema(t).Store
	withMovePartition(t, s)
	const threshold = 3
	var regs []channel.Membership
	for _, u := range []string{"a", "b", "hid", "gone"} {
		regs = append(regs, channel.Join(receipt.Key{User: u, Channel: "small"}, 1, 1, 0))
	}
	for i := range threshold + 1 {
		regs = append(regs, channel.Join(receipt.Key{User: "m" + strconv.Itoa(i), Channel: "big"}, 1, 1, 0))
	}
	_, err := s.UpsertMembers(ctx, regs)
	require.NoError(t, err)
	_, err = s.UpsertMembers(ctx, []channel.Membership{channel.Leave(receipt.Key{User: "gone", Channel: "small"}, 2, 2)})
	require.NoError(t, err)
	hideReads(t, s, "hid")

	at := time.Now().UnixMilli()
	move := func(user, ch string, kind byte, seq int64) pgstore.Move {
		return pgstore.Move{Key: receipt.Key{User: user, Channel: ch}, Kind: kind, Position: receipt.Position{Seq: seq}, AtUnixMs: at}
	}
	moves := []pgstore.Move{
		move("a", "small", 'r', 5), move("a", "small", 'd', 5), // kept
		move("hid", "small", 'r', 5), move("hid", "small", 'd', 5), // read hidden, delivered kept
		move("gone", "small", 'r', 5),     // left
		move("stranger", "small", 'r', 5), // not a member
		move("m0", "big", 'r', 5),         // past the threshold
		move("a", "open", 'r', 5),         // untracked channel
	}
	for i := range 600 { // past one statement
		moves = append(moves, move("b", "small", 'd', int64(10+i)))
	}
	n, err := s.InsertMoves(ctx, moves, threshold)
	require.NoError(t, err)
	require.EqualValues(t, 3+600, n)

	n, err = s.InsertMoves(ctx, []pgstore.Move{move("a", "small", 'r', 5), move("a", "small", 'r', 4), move("a", "small", 'r', 6)}, threshold)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the move past the logged one")
}

// hideReads stores settings by which user shares deliveries but not
// reads: the views read the settings row in their own statements (the
// kind's own writes are pkg/kinds/settings').
func hideReads(t *testing.T, s *pgstore.Store, user string) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), `INSERT INTO user_settings (user_id, share_read, share_delivered, version_ms) VALUES ($1, false, true, 1)`, user)
	require.NoError(t, err)
}
