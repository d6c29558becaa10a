package groupmentions

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// Group mentions: one row per seq (the least sender, in bytes), read and
// paged as each channel's newest cap+1, trimmed to them; a repeat changes
// nothing.
func TestGroupMentionsRows(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewSchema(t).Store
	s := NewStore(pg, nil).WithMentionCap(2)
	ctx := context.Background()
	gm := func(seq int64, sender string) channel.GroupMention {
		return channel.GroupMention{Seq: seq, Sender: sender}
	}
	n, err := s.WritePG(ctx, []channel.GroupMentions{
		{Channel: "a", Mentions: []channel.GroupMention{gm(1, "x"), gm(2, "a"), gm(3, ""), gm(4, "y")}},
		{Channel: "b", Mentions: []channel.GroupMention{gm(7, "z")}},
	})
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	n, err = s.WritePG(ctx, []channel.GroupMentions{{Channel: "a", Mentions: []channel.GroupMention{gm(2, "B"), gm(4, "z")}}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "only the lesser sender changes a row")

	got, err := s.ReadPG(ctx, []string{"a", "b", "none"})
	require.NoError(t, err)
	require.Equal(t, []channel.GroupMentions{
		{Channel: "a", Mentions: []channel.GroupMention{gm(2, "B"), gm(3, ""), gm(4, "y")}},
		{Channel: "b", Mentions: []channel.GroupMention{gm(7, "z")}},
	}, got, "the newest cap+1; B before a in bytes")
	page, err := s.PagePG(ctx, "a", 10)
	require.NoError(t, err)
	require.Equal(t, got[1:], page, "after a")
	page, err = s.PagePG(ctx, "", 1)
	require.NoError(t, err)
	require.Equal(t, got[:1], page, "at most one channel")

	trimmed, err := s.TrimPG(ctx, []string{"a"})
	require.NoError(t, err)
	require.Equal(t, int64(1), trimmed)
	var rows int
	require.NoError(t, pg.Pool().QueryRow(ctx, `SELECT count(*) FROM channel_group_mentions`).Scan(&rows))
	require.Equal(t, 4, rows)
}

// An erasure keeps the user's group mentions in the channels they had
// state in (here a read cursor, so the cursors kind names the channel),
// with no sender (the kind's PGRedact); another sender's stay.
func TestErasureRedactsTheSender(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewSchema(t).Store
	s := NewStore(pg, nil)
	ctx := context.Background()
	_, err := cursors.NewPostgres(pg).Upsert(ctx, []receipt.State{{Key: receipt.Key{User: "gone", Channel: "c1"}, Read: receipt.Cursor{Position: receipt.Position{Seq: 2}}, UpdatedAtUnixMs: 1}})
	require.NoError(t, err)
	_, err = s.WritePG(ctx, []channel.GroupMentions{{Channel: "c1", Mentions: []channel.GroupMention{{Seq: 7, Sender: "gone"}, {Seq: 8, Sender: "other"}}}})
	require.NoError(t, err)
	_, _, err = pg.Erase(ctx, tombstone.Tombstone{User: "gone", Generation: 10, ErasedAtUnixMs: 10}, kind.PGErasure([]kind.Kind{cursors.Kind, Kind}))
	require.NoError(t, err)
	gms, err := s.ReadPG(ctx, []string{"c1"})
	require.NoError(t, err)
	require.Len(t, gms, 1)
	require.Equal(t, []channel.GroupMention{{Seq: 7}, {Seq: 8, Sender: "other"}}, gms[0].Mentions, "the mention stays, without its sender")
}
