package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/pgtest"
)

// Group mentions: one row per seq (the least sender, in bytes), read and
// paged as each channel's newest cap+1, trimmed to them; a repeat changes
// nothing.
func TestGroupMentionsRows(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t).Store
	ctx := context.Background()
	gm := func(seq int64, sender string) channel.GroupMention {
		return channel.GroupMention{Seq: seq, Sender: sender}
	}
	n, err := s.InsertGroupMentions(ctx, []channel.GroupMentions{
		{Channel: "a", Mentions: []channel.GroupMention{gm(1, "x"), gm(2, "a"), gm(3, ""), gm(4, "y")}},
		{Channel: "b", Mentions: []channel.GroupMention{gm(7, "z")}},
	})
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	n, err = s.InsertGroupMentions(ctx, []channel.GroupMentions{{Channel: "a", Mentions: []channel.GroupMention{gm(2, "B"), gm(4, "z")}}})
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "only the lesser sender changes a row")

	got, err := s.GroupMentions(ctx, []string{"a", "b", "none"}, 2)
	require.NoError(t, err)
	require.Equal(t, []channel.GroupMentions{
		{Channel: "a", Mentions: []channel.GroupMention{gm(2, "B"), gm(3, ""), gm(4, "y")}},
		{Channel: "b", Mentions: []channel.GroupMention{gm(7, "z")}},
	}, got, "the newest cap+1; B before a in bytes")
	page, err := s.GroupMentionsPage(ctx, "a", 10, 2)
	require.NoError(t, err)
	require.Equal(t, got[1:], page, "after a")
	page, err = s.GroupMentionsPage(ctx, "", 1, 2)
	require.NoError(t, err)
	require.Equal(t, got[:1], page, "at most one channel")

	trimmed, err := s.TrimGroupMentions(ctx, []string{"a"}, 2)
	require.NoError(t, err)
	require.Equal(t, int64(1), trimmed)
	var rows int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM channel_group_mentions`).Scan(&rows))
	require.Equal(t, 4, rows)
}
