package cursors

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

func mergeMark(t *testing.T, s Store, st receipt.State) MergeResult {
	t.Helper()
	res, err := s.MergeMarks(context.Background(), []receipt.State{st})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0]
}

// The mark-unread epoch race through Redis: marks without an epoch apply
// at the current one and say which (Resolved, what Kafka gets); a
// mark-unread moves only the private read, to the next epoch, and the
// same call with the epoch it answered changes nothing; a mark of an
// explicit older epoch is stale and changes nothing; a stale ack arriving
// as an event (plain Merge) moves the public read only; a read at the new
// epoch advances the user's own position.
func TestMarksAndMarkUnread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t)
	k := receipt.Key{User: "mu", Channel: "c"}
	Restored(t, s, "mu")
	read := func(epoch, seq int64) receipt.State {
		c := cur(epoch, seq, "m"+strconv.FormatInt(seq, 10))
		return receipt.State{Key: k, Read: c, Delivered: receipt.Cursor{Position: receipt.Position{Seq: seq}, MessageID: c.MessageID}, DeviceID: "d", UpdatedAtUnixMs: 7}
	}
	r := mergeMark(t, s, read(receipt.EpochCurrent, 10))
	require.True(t, r.Advanced)
	require.Equal(t, read(0, 10), r.Resolved, "a new key's epoch is 0")

	u, err := s.MarkUnread(ctx, k, 6, receipt.EpochCurrent, "d2", 8)
	require.NoError(t, err)
	require.True(t, u.Advanced)
	require.Equal(t, int64(0), u.SeenEpoch)
	require.Equal(t, receipt.State{Key: k, PrivateRead: cur(1, 5, ""), DeviceID: "d2", UpdatedAtUnixMs: 8}, u.Resolved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 5}, u.State.EffectiveRead())
	require.Equal(t, cur(0, 10, "m10"), u.State.Read, "the public read does not move back")
	require.Equal(t, int64(10), u.State.Delivered.Position.Seq, "delivered never moves back")
	want, _ := receipt.Merge(r.State, u.Resolved)
	require.Equal(t, want, u.State, "the script and receipt.Merge agree")

	// The same call retried with the epoch it answered: nothing changes
	// (not even the epoch); one that saw an epoch not stored is refused.
	again, err := s.MarkUnread(ctx, k, 6, u.SeenEpoch, "d2", 9)
	require.NoError(t, err)
	require.False(t, again.Advanced)
	require.Equal(t, u.State, again.State)
	ahead, err := s.MarkUnread(ctx, k, 6, 2, "d2", 9)
	require.NoError(t, err)
	require.True(t, ahead.EpochAhead)
	require.False(t, ahead.Advanced)
	require.Equal(t, u.State, ahead.State)

	// The client that last saw epoch 0 acks seq 9: stale, nothing changes.
	r = mergeMark(t, s, read(0, 9))
	require.True(t, r.Stale)
	require.False(t, r.Advanced)
	require.Equal(t, u.State, r.State)
	// An ack of epoch 0 above the public read arriving as an event (a
	// replay): the public read takes it, the user's own view does not.
	res, err := s.Merge(ctx, []receipt.State{read(0, 11)})
	require.NoError(t, err)
	require.True(t, res[0].Advanced)
	require.Equal(t, receipt.Position{Seq: 11}, res[0].State.Read.Position)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 5}, res[0].State.EffectiveRead())

	// Without an epoch, or with the current one, a read advances.
	r = mergeMark(t, s, read(receipt.EpochCurrent, 7))
	require.True(t, r.Advanced)
	require.False(t, r.Stale)
	require.Equal(t, read(1, 7), r.Resolved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 7}, r.State.EffectiveRead())
	require.Equal(t, receipt.Position{Seq: 11}, r.State.Read.Position)
	r = mergeMark(t, s, read(1, 12))
	require.True(t, r.Advanced)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 12}, r.State.Read.Position)
	require.True(t, r.State.PrivateRead.Position.IsZero())

	// A private mark: the effective read moves, the public one does not.
	r = mergeMark(t, s, receipt.State{Key: k, PrivateRead: cur(receipt.EpochCurrent, 14, ""), DeviceID: "d", UpdatedAtUnixMs: 9})
	require.True(t, r.Advanced)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 12}, r.State.Read.Position)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 14}, r.State.EffectiveRead())
	require.Equal(t, int64(1), r.Resolved.PrivateRead.Position.Epoch)
	require.Equal(t, int64(12), r.State.Delivered.Position.Seq)

	// Mark-unread resets the private read too, and goes to epoch 2.
	u, err = s.MarkUnread(ctx, k, 3, receipt.EpochCurrent, "d", 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), u.SeenEpoch)
	require.Equal(t, receipt.Position{Epoch: 2, Seq: 2}, u.State.EffectiveRead())
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 12}, u.State.Read.Position)
	got, _, err := s.Get(ctx, k.User, []string{k.Channel})
	require.NoError(t, err)
	require.Equal(t, []receipt.State{u.State}, got)

	// Epochs compare exactly across base-62 carries, up to receipt.MaxEpoch.
	k2 := receipt.Key{User: "mu", Channel: "big"}
	_, err = s.Merge(ctx, []receipt.State{{Key: k2, Read: cur(61, 5, "m5")}})
	require.NoError(t, err)
	u, err = s.MarkUnread(ctx, k2, 5, receipt.EpochCurrent, "d", 1)
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Epoch: 62, Seq: 4}, u.State.EffectiveRead())
	_, err = s.Merge(ctx, []receipt.State{{Key: k2, Read: cur(receipt.MaxEpoch-1, 6, "")}})
	require.NoError(t, err)
	u, err = s.MarkUnread(ctx, k2, 1, receipt.EpochCurrent, "d", 1)
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Epoch: receipt.MaxEpoch, Seq: 0}, u.State.EffectiveRead())
	_, err = s.MarkUnread(ctx, k2, 1, receipt.EpochCurrent, "d", 1)
	require.ErrorIs(t, err, receipt.ErrEpochLimit)
}
