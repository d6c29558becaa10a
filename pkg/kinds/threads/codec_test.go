package threads

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/thread"
)

func cursorAt(epoch, seq int64, msg string) receipt.Cursor {
	return receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}, MessageID: msg}
}

// storedForm is what the layout keeps of st: the cursors as merging them
// into nothing leaves them, the private read without its message id.
func storedForm(st thread.State) thread.State {
	out, _ := thread.Merge(thread.State{Key: st.Key}, st, math.MaxInt32)
	out.Cursors.PrivateRead.MessageID = ""
	if len(out.Mentions) == 0 {
		out.Mentions = nil
	}
	return out
}

func TestThreadValueRoundTrip(t *testing.T) {
	k := thread.Key{User: "u1", Ref: thread.Ref{Channel: "c1", Root: 42}}
	many := make([]int64, channel.MentionCapDefault+1)
	for i := range many {
		many[i] = int64(1000 + 7*i)
	}
	cases := []struct {
		name string
		st   thread.State
		want string // "" : not checked
	}{
		{name: "followed, read", st: thread.State{Follow: thread.Follow{Following: true, VersionUnixMs: 1795416092504},
			Cursors: receipt.State{Read: cursorAt(0, 9876, "m9876"), Delivered: cursorAt(0, 9876, "m9876"), DeviceID: "d1", UpdatedAtUnixMs: 1795416092504}},
			want: "+VbmAx6e 2ZI m9876 d1 VbmAx6e"},
		{name: "unfollowed, mentions only", st: thread.State{Follow: thread.Follow{VersionUnixMs: 1795416092504}, Mentions: []int64{9875, 9876}},
			want: "-VbmAx6e @2ZH,2ZI"},
		{name: "follow at version 0", st: thread.State{Follow: thread.Follow{Following: true}}, want: "+0"},
		{name: "mentions only", st: thread.State{Mentions: []int64{1}}, want: "@1"},
		{name: "nothing", st: thread.State{}, want: ""},
		{name: "epochs, private read, delivered ahead", st: thread.State{Follow: thread.Follow{Following: true, VersionUnixMs: 5},
			Cursors: receipt.State{Read: cursorAt(receipt.MaxEpoch, 16, "m16"), PrivateRead: cursorAt(receipt.MaxEpoch, 20, "m20"),
				Delivered: cursorAt(0, 18, "m18"), DeviceID: "d0", UpdatedAtUnixMs: 1}}},
		{name: "int64 extremes", st: thread.State{Follow: thread.Follow{Following: true, VersionUnixMs: math.MaxInt64},
			Mentions: []int64{math.MaxInt64 - 1, math.MaxInt64},
			Cursors:  receipt.State{Read: cursorAt(receipt.MaxEpoch, math.MaxInt64, "x"), Delivered: cursorAt(0, math.MaxInt64, "x"), UpdatedAtUnixMs: math.MaxInt64}}},
		{name: "empty ids", st: thread.State{Cursors: receipt.State{Read: cursorAt(0, 3, ""), Delivered: cursorAt(0, 5, "")}}, want: "3   0 5 "},
		{name: "ids that look like the other parts", st: thread.State{Follow: thread.Follow{VersionUnixMs: 9}, Mentions: []int64{2},
			Cursors: receipt.State{Read: cursorAt(0, 3, "+1"), Delivered: cursorAt(0, 5, "@2"), DeviceID: "-3", UpdatedAtUnixMs: 4}}},
		{name: "id starting with a colon", st: thread.State{Cursors: receipt.State{Read: cursorAt(0, 3, ":m"), Delivered: cursorAt(0, 3, ":m"), DeviceID: ":d"}}},
		{name: "private read only", st: thread.State{Cursors: receipt.State{PrivateRead: cursorAt(0, 7, "m7")}}},
		{name: "delivered only", st: thread.State{Cursors: receipt.State{Delivered: cursorAt(0, 7, "m7")}}},
		{name: "many mentions", st: thread.State{Follow: thread.Follow{Following: true, VersionUnixMs: 3}, Mentions: many,
			Cursors: receipt.State{Read: cursorAt(1, 2, "m2")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.st.Key = k
			v, err := encodeThreadState(c.st)
			require.NoError(t, err)
			if c.want != "" || c.name == "nothing" {
				require.Equal(t, c.want, v)
			}
			got, err := decodeThreadState(k, v)
			require.NoError(t, err)
			require.Equal(t, storedForm(c.st), got)
			again, err := encodeThreadState(got)
			require.NoError(t, err)
			require.Equal(t, v, again, "a decoded value encodes as it was read")
		})
	}
}

func TestThreadValueRefusals(t *testing.T) {
	k := thread.Key{User: "u1", Ref: thread.Ref{Channel: "c1", Root: 42}}
	for name, st := range map[string]thread.State{
		"negative follow":  {Follow: thread.Follow{VersionUnixMs: -1}},
		"negative mention": {Mentions: []int64{-1}},
		"space in an id":   {Cursors: receipt.State{Read: cursorAt(0, 1, "a b")}},
		"EpochCurrent":     {Cursors: receipt.State{Read: cursorAt(receipt.EpochCurrent, 1, "m")}},
		"negative seq":     {Cursors: receipt.State{Delivered: cursorAt(0, -1, "m")}},
	} {
		st.Key = k
		_, err := encodeThreadState(st)
		require.Error(t, err, name)
	}
	for _, v := range []string{"+", "-0", "@", "@1,", "@x!", "+1 @2 +3", "+1 v1:0:1:m:0:1:m:d:0", "1 m d", "+1 2 m d 3 4 5 6 7"} {
		_, err := decodeThreadState(k, v)
		require.Error(t, err, "%q", v)
	}
}

func TestThreadFieldRoundTrip(t *testing.T) {
	for _, ref := range []thread.Ref{{Channel: "c1", Root: 1}, {Channel: "!room:example.org", Root: math.MaxInt64}} {
		got, err := parseThreadField(threadField(ref))
		require.NoError(t, err)
		require.Equal(t, ref, got)
	}
	for _, f := range []string{"c1", " 1", "c1 ", "c1 1!"} {
		_, err := parseThreadField(f)
		require.Error(t, err, "%q", f)
	}
	h := thread.Head{Ref: thread.Ref{Channel: "c", Root: 3}, Seq: math.MaxInt64, MessageID: "", UpdatedAtUnixMs: math.MaxInt64}
	v, err := encodeThreadHead(h)
	require.NoError(t, err)
	got, err := decodeThreadHead(h.Ref, v)
	require.NoError(t, err)
	require.Equal(t, h, got)
}
