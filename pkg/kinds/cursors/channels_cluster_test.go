package cursors_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/redistest"
	"github.com/readstate/receipts/pkg/views/unread"
)

// In Redis Cluster every channel operation works: each script touches one
// slot ({user} or {channel}), the bulk
// unread read (the unread view's) pipelines a user's script with heads on other masters, and
// every walk visits every master.
func TestClusterChannelState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cfg := redisstore.ClientConfig{Mode: redisstore.ModeCluster, Addrs: c.Addrs[:1], Prefix: "receipts:"}
	require.NoError(t, cfg.Validate())
	s := openStore(t, cfg)
	const user, capN = "alice", 5
	cursors.Restored(t, cursors.NewStore(s), user)
	var channels []string
	var heads []channel.Head
	var regs []channel.Membership
	var ms []channel.Mentions
	for i := range 30 {
		ch := "ch" + strconv.Itoa(i)
		channels = append(channels, ch)
		k := receipt.Key{User: user, Channel: ch}
		heads = append(heads, channel.Head{Channel: ch, Seq: int64(20 + i)})
		regs = append(regs, channel.Join(k, 1, 1, 2))
		ms = append(ms, channel.Mentions{Key: k, Seqs: []int64{3, 15}})
	}
	cursors.PutHeads(t, cursors.NewStore(s), heads...)
	cursors.PutMemberships(t, cursors.NewStore(s), regs...)
	cursors.PutMentions(t, cursors.NewStore(s), capN, ms...)
	marks := make([]receipt.State, len(channels))
	for i, ch := range channels {
		marks[i] = receipt.State{Key: receipt.Key{User: user, Channel: ch}, Read: receipt.Cursor{Position: receipt.Position{Epoch: receipt.EpochCurrent, Seq: 10}}}
	}
	res, err := cursors.NewStore(s).MergeMarks(ctx, marks)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
		require.Zero(t, r.Resolved.Read.Position.Epoch)
	}
	// Marks of many users (slots on every master) in one call: each
	// compare-and-set script gets the keys of one slot.
	var many []receipt.State
	for i := range 40 {
		cursors.Restored(t, cursors.NewStore(s), "m"+strconv.Itoa(i))
	}
	for i := range 40 {
		many = append(many, receipt.State{Key: receipt.Key{User: "m" + strconv.Itoa(i), Channel: "ch0"}, Read: receipt.Cursor{Position: receipt.Position{Epoch: receipt.EpochCurrent, Seq: 3}}})
	}
	res, err = cursors.NewStore(s).MergeMarks(ctx, many)
	require.NoError(t, err)
	for i, r := range res {
		require.NoError(t, r.Err)
		require.True(t, r.Advanced)
		got, _, err := cursors.NewStore(s).Get(ctx, many[i].Key.User, []string{"ch0"})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, int64(3), got[0].Read.Position.Seq)
	}
	u, err := cursors.NewStore(s).MarkUnread(ctx, receipt.Key{User: user, Channel: "ch0"}, 2, receipt.EpochCurrent, "d", 1)
	require.NoError(t, err)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 1}, u.State.EffectiveRead())

	view, err := unread.NewStore(nil, s).WithMentionCap(capN).Read(ctx, user, nil)
	require.NoError(t, err)
	require.Len(t, view.Channels, 30)
	require.Empty(t, view.MissingHeads)
	for _, cv := range view.Channels {
		i, _ := strconv.Atoi(cv.Channel[2:])
		read := int64(10)
		if i == 0 {
			read = 1
		}
		require.Equal(t, int64(20+i)-read, cv.Unread, cv.Channel)
		wantMentions := int64(1)
		if i == 0 {
			wantMentions = 2
		}
		require.Equal(t, wantMentions, cv.Mentions, cv.Channel)
	}

	var found []string
	for cur := (redisstore.ScanCursor{}); !cur.Done(); {
		page, next, err := s.ScanTagged(ctx, "hd:", cur, 100)
		require.NoError(t, err)
		found = append(found, page...)
		cur = next
	}
	slices.Sort(found)
	want := slices.Clone(channels)
	slices.Sort(want)
	require.Equal(t, want, slices.Compact(found), "the walk finds the channels on every master")
}
