package event

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The hand-written Cursors decoder reads what the generated one reads,
// by protobuf's rules: random messages, and two concatenated (a later
// scalar wins, a repeated message merges); appendCursors writes what
// proto.Marshal does.
func TestParseCursorsMatchesProto(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return rng.Int64()
		}
		return rng.Int64N(300)
	}
	cur := func() *recordv1.Cursor {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return &recordv1.Cursor{MessageId: "m"}
		}
		c := &recordv1.Cursor{Position: &recordv1.Position{Epoch: num(), Seq: num()}}
		if rng.IntN(2) == 0 {
			c.MessageId = "m" + string(rune('a'+rng.IntN(26)))
		}
		return c
	}
	msg := func() *recordv1.Cursors {
		m := &recordv1.Cursors{Read: cur(), Delivered: cur(), PrivateRead: cur()}
		if rng.IntN(2) == 0 {
			m.DeviceId = "d"
		}
		return m
	}
	for range 3000 {
		a, b := msg(), msg()
		ab, err := proto.Marshal(a)
		require.NoError(t, err)
		bb, err := proto.Marshal(b)
		require.NoError(t, err)
		for _, v := range [][]byte{ab, append(append([]byte{}, ab...), bb...)} {
			var m recordv1.Cursors
			require.NoError(t, proto.Unmarshal(v, &m))
			want := receipt.State{Read: cursorFromRecord(m.GetRead()), Delivered: cursorFromRecord(m.GetDelivered()),
				PrivateRead: cursorFromRecord(m.GetPrivateRead()), DeviceID: m.GetDeviceId()}
			var got receipt.State
			require.NoError(t, parseCursors(v, &got))
			require.Equal(t, want, got)
			if len(v) == len(ab) {
				require.Equal(t, cursorsSize(got), len(appendCursors(nil, got)))
				canon, err := proto.Marshal(recordCursorsAll(got))
				require.NoError(t, err)
				require.Equal(t, string(canon), string(appendCursors(nil, got)))
			}
		}
	}
}

// recordCursorsAll is recordCursors with the device even without a
// position (appendCursors writes it regardless).
func recordCursorsAll(s receipt.State) *recordv1.Cursors {
	if c := recordCursors(s); c != nil {
		return c
	}
	return &recordv1.Cursors{DeviceId: s.DeviceID}
}

// parseHead reads a Head as the generated decoder does, also two
// concatenated.
func TestParseHeadMatchesProto(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	msg := func() *recordv1.Head {
		switch rng.IntN(4) {
		case 0:
			return &recordv1.Head{}
		case 1:
			return &recordv1.Head{Head: &recordv1.Cursor{MessageId: "m"}}
		}
		return &recordv1.Head{Head: &recordv1.Cursor{Position: &recordv1.Position{Epoch: rng.Int64N(3), Seq: rng.Int64()}, MessageId: "m" + string(rune('a'+rng.IntN(26)))}}
	}
	for range 2000 {
		ab, err := proto.Marshal(msg())
		require.NoError(t, err)
		bb, err := proto.Marshal(msg())
		require.NoError(t, err)
		for _, v := range [][]byte{ab, append(append([]byte{}, ab...), bb...)} {
			var m recordv1.Head
			require.NoError(t, proto.Unmarshal(v, &m))
			var got receipt.Cursor
			found, err := parseHead(v, &got)
			require.NoError(t, err)
			require.Equal(t, m.Head != nil, found)
			want := receipt.Cursor{Position: receipt.Position{Epoch: m.GetHead().GetPosition().GetEpoch(), Seq: m.GetHead().GetPosition().GetSeq()}, MessageID: m.GetHead().GetMessageId()}
			require.Equal(t, want, got)
		}
	}
}

// parseMembership reads a Membership as the generated decoder does.
func TestParseMembershipMatchesProto(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		a := &recordv1.Membership{ChannelId: "c", Member: rng.IntN(2) == 0, VersionSeq: rng.Int64(), VersionUnixMs: rng.Int64N(5), JoinSeq: rng.Int64N(1 << 40)}
		b := &recordv1.Membership{UserId: "u", Member: rng.IntN(2) == 0, JoinSeq: rng.Int64N(3)}
		ab, err := proto.Marshal(a)
		require.NoError(t, err)
		bb, err := proto.Marshal(b)
		require.NoError(t, err)
		for _, v := range [][]byte{ab, append(append([]byte{}, ab...), bb...)} {
			var m recordv1.Membership
			require.NoError(t, proto.Unmarshal(v, &m))
			var got channel.Membership
			require.NoError(t, parseMembership(v, &got))
			require.Equal(t, channel.Membership{Member: m.GetMember(), VersionSeq: m.GetVersionSeq(), VersionUnixMs: m.GetVersionUnixMs(), JoinSeq: m.GetJoinSeq()}, got)
		}
	}
}

// parseGroupMentions reads a GroupMentions as the generated decoder does.
func TestParseGroupMentionsMatchesProto(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		g := &recordv1.GroupMentions{}
		for range rng.IntN(channel.MaxGroupMentionsPerEvent + 2) {
			m := &recordv1.GroupMention{Seq: rng.Int64N(100)}
			if rng.IntN(2) == 0 {
				m.SenderId = "s" + string(rune('a'+rng.IntN(26)))
			}
			g.Mentions = append(g.Mentions, m)
		}
		v, err := proto.Marshal(g)
		require.NoError(t, err)
		got, err := parseGroupMentions(v)
		require.NoError(t, err)
		require.Len(t, got, len(g.Mentions))
		for i, m := range g.Mentions {
			require.Equal(t, channel.GroupMention{Seq: m.GetSeq(), Sender: m.GetSenderId()}, got[i])
		}
	}
	// Past the bound by more than one, reading stops.
	g := &recordv1.GroupMentions{}
	for i := range channel.MaxGroupMentionsPerEvent + 2 {
		g.Mentions = append(g.Mentions, &recordv1.GroupMention{Seq: int64(i + 1)})
	}
	v, err := proto.Marshal(g)
	require.NoError(t, err)
	_, err = parseGroupMentions(v)
	require.ErrorIs(t, err, ErrUndecodable)
}
