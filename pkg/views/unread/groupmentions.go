package unread

// The Redis read's group mentions: a channel's set (pkg/kinds/groupmentions,
// which owns its layout, writes and hydrates it), read above a view's
// read only where the channel's top (the channel value's fifth part,
// read with the heads) is above it.

import (
	"context"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/redisstore"
)

// readGroupMentions sets the GroupSeqs of the views that have group
// mentions above their read (a second read, of those channels' sets
// only); missing gets the channels whose group mentions Redis does not
// know. tops are the tops of channels (ascending; the views are some of
// them, in the same order).
func (s Store) readGroupMentions(ctx context.Context, views []ChannelView, channels []string, tops []string, missing []string) ([]string, error) {
	var idx []int
	var bound [redisstore.SeqWidth]byte
	j := 0
	for i := range views {
		v := &views[i]
		for channels[j] != v.Channel {
			j++
		}
		top := tops[j]
		switch {
		case top == "":
			missing = append(missing, v.Channel)
		case v.HasMembership && !v.Membership.Member:
			// A group mention mentions members (a channel that tracks none
			// counts everyone).
		case v.Unread > 0 && top > string(redisstore.AppendPadded(bound[:0], v.State.EffectiveRead().Seq)):
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return missing, nil
	}
	chs, reads := make([]string, len(idx)), make([]int64, len(idx))
	for k, i := range idx {
		chs[k], reads[k] = views[i].Channel, views[i].State.EffectiveRead().Seq
	}
	sets, err := s.groupMentionStore().ReadAboveRedis(ctx, chs, reads)
	if err != nil {
		return missing, err
	}
	for k, i := range idx {
		v := &views[i]
		if sets[k] == nil {
			// The top says there are some above the read: the set is lost.
			missing = append(missing, v.Channel)
			continue
		}
		v.GroupSeqs = groupSeqsFor(sets[k], v.State.Key.User)
	}
	return missing, nil
}

// groupSeqsFor is the seqs of group mentions (ascending) that mention
// user: those another member sent.
func groupSeqsFor(gms []channel.GroupMention, user string) []int64 {
	return channel.GroupMentionSeqsFor(gms, user, 0)
}
