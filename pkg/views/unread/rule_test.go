package unread

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// in is an Input read at read (public) and private, with the head at
// head.
func in(read, private, head int64) Input {
	return Input{
		State: receipt.State{Key: receipt.Key{User: "u", Channel: "c"},
			Read: receipt.Cursor{Position: receipt.Position{Seq: read}}, PrivateRead: receipt.Cursor{Position: receipt.Position{Seq: private}}},
		HasState: true, Head: channel.Head{Channel: "c", Seq: head}, HeadKnown: true,
	}
}

// Count, without a store: the unread messages above the effective read,
// the deleted ones out; the mentions above it, not deleted, with the
// group mentions at the levels that count them and not in a channel the
// user left; nothing without unread messages; the badge's part of each
// level.
func TestCount(t *testing.T) {
	t.Parallel()
	const cap = 3
	all, mentionsOnly, none := Level{Level: notification.All}, Level{Level: notification.Mentions}, Level{Level: notification.None}
	withMentions := func(i Input, own, group []int64) Input {
		i.MentionSeqs, i.GroupSeqs = own, group
		return i
	}
	left := withMentions(in(2, 0, 10), []int64{5}, []int64{6})
	left.Membership, left.HasMembership = channel.Membership{Member: false}, true
	deleted := withMentions(in(2, 0, 10), []int64{3, 5}, []int64{5, 7})
	deleted.Deletions = deletions.Count{Known: true, Deleted: 2, FirstKept: 4, DeletedMentions: []int64{3, 7}}
	allDeleted := withMentions(in(2, 0, 4), []int64{3, 4}, nil)
	allDeleted.Deletions = deletions.Count{Known: true, Deleted: 2, FirstKept: 5, DeletedMentions: []int64{3, 4}}
	for _, c := range []struct {
		name string
		in   Input
		at   Level
		want Counts
	}{
		{"read to the head", in(10, 0, 10), all, Counts{CountsUnread: true, CountsMentions: true}},
		{"unread", in(4, 0, 10), all, Counts{Unread: 6, FirstUnread: 5, CountsUnread: true, CountsMentions: true}},
		{"the private read counts", in(4, 7, 10), all, Counts{Unread: 3, FirstUnread: 8, CountsUnread: true, CountsMentions: true}},
		{"no state", Input{Head: channel.Head{Seq: 3}}, all, Counts{Unread: 3, FirstUnread: 1, CountsUnread: true, CountsMentions: true}},
		{"mentions above the read", withMentions(in(4, 0, 10), []int64{2, 4, 5, 9}, nil), all,
			Counts{Unread: 6, FirstUnread: 5, Mentions: 2, CountsUnread: true, CountsMentions: true}},
		{"no unread, no mentions", withMentions(in(10, 0, 10), []int64{11}, []int64{12}), all, Counts{CountsUnread: true, CountsMentions: true}},
		{"capped", withMentions(in(0, 0, 10), []int64{1, 2, 3, 4}, nil), none, Counts{Unread: 10, FirstUnread: 1, Mentions: 4, MentionsCapped: true}},
		{"group mentions at all, each message once", withMentions(in(2, 0, 10), []int64{3, 5}, []int64{1, 5, 6}), all,
			Counts{Unread: 8, FirstUnread: 3, Mentions: 3, CountsUnread: true, CountsMentions: true}},
		{"group mentions at mentions", withMentions(in(2, 0, 10), []int64{3}, []int64{6}), mentionsOnly,
			Counts{Unread: 8, FirstUnread: 3, Mentions: 2, CountsMentions: true}},
		{"no group mentions at none", withMentions(in(2, 0, 10), []int64{3}, []int64{6}), none, Counts{Unread: 8, FirstUnread: 3, Mentions: 1}},
		{"muted at all: mentions only", withMentions(in(2, 0, 10), []int64{3}, []int64{6}), Level{Level: notification.All, Muted: true},
			Counts{Unread: 8, FirstUnread: 3, Mentions: 2, CountsMentions: true}},
		{"group mentions capped at cap+1", withMentions(in(0, 0, 10), []int64{1, 2, 3}, []int64{4, 5, 6}), all,
			Counts{Unread: 10, FirstUnread: 1, Mentions: cap + 1, MentionsCapped: true, CountsUnread: true, CountsMentions: true}},
		{"left: no group mentions", left, all, Counts{Unread: 8, FirstUnread: 3, Mentions: 1, CountsUnread: true, CountsMentions: true}},
		{"deletions: messages and mentions", deleted, all, Counts{Unread: 6, FirstUnread: 4, Mentions: 1, CountsUnread: true, CountsMentions: true}},
		{"every unread message deleted", allDeleted, all, Counts{CountsUnread: true, CountsMentions: true}},
	} {
		require.Equal(t, c.want, Count(c.in, c.at, cap), c.name)
	}
}

// A channel view answers Count's counts: its fields at no level, At and
// MentionsAt at one.
func TestChannelViewCounts(t *testing.T) {
	t.Parallel()
	i := in(2, 0, 10)
	i.MentionSeqs, i.GroupSeqs = []int64{3}, []int64{6, 7}
	v := newChannelView("c", i, 5)
	require.Equal(t, [4]int64{8, 3, 1, 0}, [4]int64{v.Unread, v.FirstUnread, v.Mentions, 0})
	require.Equal(t, Count(i, Level{Level: notification.Mentions}, 5), v.At(notification.Mentions, false))
	n, capped := v.MentionsAt(true)
	require.Equal(t, int64(3), n)
	require.False(t, capped)
	n, _ = v.MentionsAt(false)
	require.Equal(t, int64(1), n)
}

// A view shows a mention count at most at the cap it counted with, its
// store's.
func TestChannelViewShowsMentionsUpToItsCap(t *testing.T) {
	t.Parallel()
	i := in(2, 0, 10)
	i.MentionSeqs = []int64{3, 4, 5}
	v := newChannelView("c", i, 2)
	require.Equal(t, int64(3), v.Mentions)
	require.True(t, v.MentionsCapped)
	require.Equal(t, int64(2), v.Shown(v.Mentions), "cap+")
	require.Equal(t, int64(1), v.Shown(1))
	s := NewStore(nil, nil)
	require.Equal(t, NewStore(nil, nil).WithMentionCap(0), s.WithMentionCap(-1), "not positive: the default")
	require.NotEqual(t, s, s.WithMentionCap(7))
}
