package groupmentions

import (
	"fmt"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A group mention's member in the channel's sorted set: the padded seq
// (redisstore.PadSeq, redisstore.SeqWidth characters) then the sender
// (merge.lua reads the same).

func encode(m channel.GroupMention) string { return redisstore.PadSeq(m.Seq) + m.Sender }

// decode reads a member; one too short for its seq, or whose seq does
// not parse, is an error.
func decode(m string) (channel.GroupMention, error) {
	if len(m) < redisstore.SeqWidth {
		return channel.GroupMention{}, fmt.Errorf("decoding a redis group mention: %q", m)
	}
	q, err := redisstore.ParsePadded(m[:redisstore.SeqWidth])
	if err != nil {
		return channel.GroupMention{}, fmt.Errorf("decoding a redis group mention: %q: %w", m, err)
	}
	return channel.GroupMention{Seq: q, Sender: m[redisstore.SeqWidth:]}, nil
}
