package event

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
)

// EncodeHeadWithGroupMentions builds the channel event of a head that
// carries group mentions (at most channel.MaxGroupMentionsPerEvent).
func EncodeHeadWithGroupMentions(h channel.Head, gms []channel.GroupMention) (*kgo.Record, error) {
	d := Decoded{Channel: &h}
	if len(gms) > 0 {
		d.GroupMentions = &channel.GroupMentions{Channel: h.Channel, Mentions: gms}
	}
	return EncodeDecoded(d)
}

// addGroupMentions sets a channel event's group mentions (version 7).
func addGroupMentions(ev *recordv1.ChannelEvent, g *channel.GroupMentions) {
	if g == nil || len(g.Mentions) == 0 {
		return
	}
	ev.SchemaVersion = GroupMentionSchemaVersion
	ev.GroupMentions = make([]*recordv1.GroupMention, len(g.Mentions))
	for i, m := range g.Mentions {
		ev.GroupMentions[i] = &recordv1.GroupMention{Seq: m.Seq, SenderId: m.Sender}
	}
}

// decodeGroupMentions reads and validates a channel event's group
// mentions (nil when it carries none).
func decodeGroupMentions(version uint32, ch string, pms []*recordv1.GroupMention) (*channel.GroupMentions, error) {
	if len(pms) == 0 {
		return nil, nil
	}
	ms := make([]channel.GroupMention, len(pms))
	for i, m := range pms {
		ms[i] = channel.GroupMention{Seq: m.GetSeq(), Sender: m.GetSenderId()}
	}
	return checkGroupMentions(version, ch, ms)
}

// checkGroupMentions validates a channel's group mentions ms (nil when
// there are none) and keeps one per seq.
func checkGroupMentions(version uint32, ch string, ms []channel.GroupMention) (*channel.GroupMentions, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	if version < GroupMentionSchemaVersion {
		return nil, fmt.Errorf("%w: group mentions in a channel event of schema version %d", ErrUndecodable, version)
	}
	g := &channel.GroupMentions{Channel: ch, Mentions: ms}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	g.Mentions = channel.MergeGroupMentions(nil, g.Mentions, len(g.Mentions))
	return g, nil
}
