package unread

// The view's Postgres fallback: the same inputs read from the durable
// tables (cursors, memberships and heads through pgstore; mentions,
// group mentions and deletions through their kinds), counted by the
// same rule (Count).

import (
	"context"
	"slices"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/receipt"
)

// ReadPG is a user's counts in the listed channels from Postgres alone,
// in channel order (no channel listed: the user's states and registers
// of Postgres' first page, less the channels the user left). It reads
// what Read reads, where Read reads it: group mentions and deletions
// only of the channels with unread messages.
func (s Store) ReadPG(ctx context.Context, user string, channels []string) ([]ChannelView, error) {
	states, err := cursors.NewPostgres(s.pg).Get(ctx, user, channels)
	if err != nil {
		return nil, err
	}
	regs, err := s.memberStore().ReadPG(ctx, user, channels)
	if err != nil {
		return nil, err
	}
	ms, err := s.mentionStore().ReadPG(ctx, user, channels)
	if err != nil {
		return nil, err
	}
	byCh := map[string]*Input{}
	input := func(ch string) *Input {
		in, ok := byCh[ch]
		if !ok {
			in = &Input{State: receipt.State{Key: receipt.Key{User: user, Channel: ch}}}
			byCh[ch] = in
		}
		return in
	}
	for _, ch := range channels {
		input(ch)
	}
	for _, st := range states {
		in := input(st.Key.Channel)
		in.State, in.HasState = st, true
	}
	for _, m := range regs {
		in := input(m.Key.Channel)
		in.Membership, in.HasMembership = m, true
	}
	var set []string
	for ch, in := range byCh {
		if len(channels) == 0 && in.HasMembership && !in.Membership.Member {
			continue // left: the channel no longer counts
		}
		set = append(set, ch)
	}
	slices.Sort(set)
	hs, err := s.headStore().ReadPG(ctx, set)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		byCh[h.Channel].Head, byCh[h.Channel].HeadKnown = h, true
	}
	for _, m := range ms {
		if in, ok := byCh[m.Key.Channel]; ok {
			in.MentionSeqs = sorted(m.Seqs)
		}
	}
	// The channels with unread messages: their group mentions (where the
	// user has not left) and deletions.
	var unread, members []string
	for _, ch := range set {
		in := byCh[ch]
		if n, _ := channel.Unread(in.Head.Seq, in.State); n > 0 {
			unread = append(unread, ch)
			if !in.HasMembership || in.Membership.Member {
				members = append(members, ch)
			}
		}
	}
	if len(members) > 0 {
		gms, err := s.groupMentionStore().ReadPG(ctx, members)
		if err != nil {
			return nil, err
		}
		for _, gm := range gms {
			in := byCh[gm.Channel]
			in.GroupSeqs = sorted(groupSeqsFor(gm.Mentions, user))
		}
	}
	qs := make([]deletions.Query, len(unread))
	for i, ch := range unread {
		qs[i] = deletionQuery(*byCh[ch])
	}
	if len(qs) > 0 {
		dc, err := s.deletionStore().CountPG(ctx, qs)
		if err != nil {
			return nil, err
		}
		for i, ch := range unread {
			byCh[ch].Deletions = dc[i]
		}
	}
	out := make([]ChannelView, len(set))
	for i, ch := range set {
		out[i] = newChannelView(ch, *byCh[ch], s.mentionCap)
	}
	return out, nil
}

// sorted is seqs ascending (mostly they are: checked first).
func sorted(seqs []int64) []int64 {
	if !slices.IsSorted(seqs) {
		seqs = slices.Sorted(slices.Values(seqs))
	}
	return seqs
}
