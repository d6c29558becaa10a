package e2e

import (
	"context"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// deleteShare is the share of the counts workload's steps that delete a
// message.
const deleteShare = 0.08

// unreadKept is the model's unread count and first unread seq in ch above
// the effective read seq eff: the seqs in (eff, head] not deleted.
func (m *countsModel) unreadKept(ch string, eff int64) (unread, first int64) {
	for s := eff + 1; s <= m.heads[ch]; s++ {
		if m.deleted[ch][s] {
			continue
		}
		unread++
		if first == 0 {
			first = s
		}
	}
	return unread, first
}

// deleteStep deletes a message of ch: one already posted, or one whose
// seq is taken but not yet posted (held back, or soon to be), so a delete
// often comes before its notice. Half the deletes go through
// DeleteMessage, half through a notice batch; some are repeated.
func (w *countsWorkload) deleteStep(ctx context.Context, ch string) {
	seq := 1 + w.rng.Int64N(w.seqs[ch].Load()+2)
	for range 1 + boolInt(w.rng.Float64() < w.dup) {
		var ok bool
		if w.rng.IntN(2) == 0 {
			_, ok = call(ctx, w, w.cl.DeleteMessage, &receiptsv1.DeleteMessageRequest{ChannelId: ch, Seq: seq})
		} else {
			_, ok = call(ctx, w, w.cl.NotifyMessages, &receiptsv1.NotifyMessagesRequest{Notices: []*receiptsv1.MessageNotice{
				{ChannelId: ch, Seq: seq, Deleted: true}}})
		}
		if !ok {
			return
		}
		w.m.mu.Lock()
		w.m.ops++
		if w.m.deleted[ch] == nil {
			w.m.deleted[ch] = map[int64]bool{}
		}
		w.m.deleted[ch][seq] = true
		w.m.mu.Unlock()
	}
}
