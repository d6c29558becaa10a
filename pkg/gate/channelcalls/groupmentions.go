package channelcalls

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/gate/seam"
)

// groupMentionsOf is the group mentions of notices, one entry per
// channel in first-seen order, each merged (one per seq, the newest
// cap+1: older ones would be trimmed at once).
func groupMentionsOf(notices []seam.Notice, mentionCap int) []channel.GroupMentions {
	var out []channel.GroupMentions
	at := map[string]int{}
	for _, n := range notices {
		if !n.MentionAll {
			continue
		}
		i, ok := at[n.Channel]
		if !ok {
			i = len(out)
			at[n.Channel] = i
			out = append(out, channel.GroupMentions{Channel: n.Channel})
		}
		out[i].Mentions = append(out[i].Mentions, channel.GroupMention{Seq: n.Seq, Sender: n.Sender})
	}
	for i := range out {
		out[i].Mentions = channel.MergeGroupMentions(nil, out[i].Mentions, mentionCap)
	}
	return out
}

// addGroupMentions writes group mentions to Redis; a failure is logged
// and counted (the notices report realtime_degraded).
func (g *Channels) addGroupMentions(ctx context.Context, groups []channel.GroupMentions) error {
	err := g.GroupMentionStore().AddRedis(ctx, groups)
	if err != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpMerge, 1, err)
	}
	return err
}

// groupMentionRecords adds the channel events carrying group mentions,
// each with its channel's head (at most channel.MaxGroupMentionsPerEvent
// an event: the event stays under its size bound).
func groupMentionRecords(top map[string]channel.Head, groups []channel.GroupMentions, add func(*kgo.Record, error) error) error {
	for _, gm := range groups {
		for ms := gm.Mentions; len(ms) > 0; {
			part := ms[:min(len(ms), channel.MaxGroupMentionsPerEvent)]
			ms = ms[len(part):]
			if err := add(event.EncodeHeadWithGroupMentions(top[gm.Channel], part)); err != nil {
				return err
			}
		}
	}
	return nil
}
