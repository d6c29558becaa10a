package members

import (
	"fmt"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// A register's value in both membership hashes: "M VERSION_SEQ
// VERSION_MS JOIN_SEQ" (M 1 or 0, numbers base 62; register.lua reads
// the same).

func encodeRegister(m channel.Membership) (string, error) {
	if m.VersionSeq < 0 || m.VersionUnixMs < 0 || m.JoinSeq < 0 {
		return "", fmt.Errorf("storing the membership of %s in redis: negative number in %+v", m.Key.KafkaKey(), m)
	}
	b := []byte{'0', ' '}
	if m.Member {
		b[0] = '1'
	}
	b = redisstore.AppendB62(b, m.VersionSeq)
	b = append(b, ' ')
	b = redisstore.AppendB62(b, m.VersionUnixMs)
	b = append(b, ' ')
	return string(redisstore.AppendB62(b, m.JoinSeq)), nil
}

// DecodeRegister decodes a membership register's value (a field of the
// user's hash UserMembersKey or of the channel's ChannelMembersKey): a
// view or a kind whose script reads it with its own keys decodes it here.
func DecodeRegister(k receipt.Key, v string) (channel.Membership, error) {
	var f [4]string
	bad := func() (channel.Membership, error) {
		return channel.Membership{}, fmt.Errorf("decoding the redis membership of %s: unexpected %q", k.KafkaKey(), v)
	}
	if redisstore.SplitSpaces(v, f[:]) != len(f) || (f[0] != "0" && f[0] != "1") {
		return bad()
	}
	m := channel.Membership{Key: k, Member: f[0] == "1"}
	var err error
	for i, p := range []*int64{&m.VersionSeq, &m.VersionUnixMs, &m.JoinSeq} {
		if *p, err = redisstore.ParseB62(f[i+1]); err != nil {
			return bad()
		}
	}
	return m, nil
}
