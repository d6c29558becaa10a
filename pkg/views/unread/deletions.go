package unread

// The Redis read's deletions: a channel's set (pkg/kinds/deletions, which
// owns its layout, writes and hydrates it and counts it), counted for
// the channels whose count (the channel value's fourth part, read with
// the heads) says they have some and that have unread messages.

import (
	"context"
	"slices"

	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/thread"
)

// readDeletions sets the Deletions of the views marked to count them (one
// script each, in one pipeline); missing gets the channels whose set
// Redis lost.
func (s Store) readDeletions(ctx context.Context, views []ChannelView, missing []string) ([]string, error) {
	var qs []deletions.Query
	var idx []int
	for i := range views {
		v := &views[i]
		if !v.countDeletions {
			continue
		}
		qs, idx = append(qs, deletionQuery(v.Input)), append(idx, i)
	}
	if len(qs) == 0 {
		return missing, nil
	}
	counts, err := s.deletionStore().CountChannelsRedis(ctx, qs)
	if err != nil {
		return missing, err
	}
	for k, i := range idx {
		if !counts[k].Known {
			missing = append(missing, views[i].Channel)
			continue
		}
		views[i].Deletions = counts[k]
	}
	return missing, nil
}

// deletionQuery asks how a channel's deletions change in's counts: those
// of its unread messages, and which of its mentions above the read,
// explicit or group, are deleted (each asked once). Both stores ask it.
func deletionQuery(in Input) deletions.Query {
	read := in.State.EffectiveRead().Seq
	q := deletions.Query{Ref: thread.Ref{Channel: in.State.Key.Channel}, Read: read, Head: in.Head.Seq}
	q.Mentions = slices.Concat(live(in.MentionSeqs, read, nil), live(in.GroupSeqs, read, nil))
	slices.Sort(q.Mentions)
	q.Mentions = slices.Compact(q.Mentions)
	return q
}
