package e2e

import (
	"time"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/receipt"
)

// groupMentionShare is the share of the model test's messages that
// mention the whole channel (mention_all).
const groupMentionShare = 0.15

// groupMention draws whether a message mentions the whole channel.
func (w *countsWorkload) groupMention() bool { return w.rng.Float64() < groupMentionShare }

// applyGroupMention records an acknowledged mention_all notice (the
// caller holds m.mu).
func (m *countsModel) applyGroupMention(req *receiptsv1.NotifyMessageRequest) {
	if !req.GetMentionAll() {
		return
	}
	if m.groupMentions == nil {
		m.groupMentions = map[string]map[int64]string{}
	}
	if m.groupMentions[req.ChannelId] == nil {
		m.groupMentions[req.ChannelId] = map[int64]string{}
	}
	m.groupMentions[req.ChannelId][req.Seq] = req.SenderId
}

// groupMentionsAbove counts the channel's group mentions above eff that
// mention the key's user and are not among its own mentions: every one
// not sent by the user and not deleted, unless the user's register says
// it left or the user's level there is none.
func (m *countsModel) groupMentionsAbove(k receipt.Key, eff int64) int64 {
	mk := m.key(k)
	if mk.hasRegister && !mk.member {
		return 0
	}
	if l, _ := m.levelAt(k, time.Now().UnixMilli()); l == notification.None {
		return 0
	}
	var n int64
	for seq, sender := range m.groupMentions[k.Channel] {
		if seq > eff && sender != k.User && !mk.mentions[seq] && !m.deleted[k.Channel][seq] {
			n++
		}
	}
	return n
}
