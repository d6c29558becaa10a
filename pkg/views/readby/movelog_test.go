package readby_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/views/readby"
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
	_, err := s.Pool().Exec(ctx, `CREATE TABLE cursor_moves_any PARTITION OF cursor_moves DEFAULT`)
	require.NoError(t, err)
	const threshold = 3
	var regs []channel.Membership
	for _, u := range []string{"a", "b", "hid", "gone"} {
		regs = append(regs, channel.Join(receipt.Key{User: u, Channel: "small"}, 1, 1, 0))
	}
	for i := range threshold + 1 {
		regs = append(regs, channel.Join(receipt.Key{User: "m" + strconv.Itoa(i), Channel: "big"}, 1, 1, 0))
	}
	_, err = members.NewStore(s, nil).WritePG(ctx, regs)
	require.NoError(t, err)
	_, err = members.NewStore(s, nil).WritePG(ctx, []channel.Membership{channel.Leave(receipt.Key{User: "gone", Channel: "small"}, 2, 2)})
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO user_settings (user_id, share_read, share_delivered, version_ms) VALUES ($1, false, true, 1)`, "hid")
	require.NoError(t, err)

	at := time.Now().UnixMilli()
	move := func(user, ch string, side readby.Side, seq int64) readby.LoggedMove {
		return readby.LoggedMove{Key: receipt.Key{User: user, Channel: ch}, Side: side, Position: receipt.Position{Seq: seq}, AtUnixMs: at}
	}
	moves := []readby.LoggedMove{
		move("a", "small", readby.Read, 5), move("a", "small", readby.Delivered, 5), // kept
		move("hid", "small", readby.Read, 5), move("hid", "small", readby.Delivered, 5), // read hidden, delivered kept
		move("gone", "small", readby.Read, 5),     // left
		move("stranger", "small", readby.Read, 5), // not a member
		move("m0", "big", readby.Read, 5),         // past the threshold
		move("a", "open", readby.Read, 5),         // untracked channel
	}
	for i := range 600 { // past one statement
		moves = append(moves, move("b", "small", readby.Delivered, int64(10+i)))
	}
	n, err := readby.NewStore(s, nil).InsertMoves(ctx, moves, threshold)
	require.NoError(t, err)
	require.EqualValues(t, 3+600, n)

	n, err = readby.NewStore(s, nil).InsertMoves(ctx, []readby.LoggedMove{move("a", "small", readby.Read, 5), move("a", "small", readby.Read, 4), move("a", "small", readby.Read, 6)}, threshold)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the move past the logged one")
}
