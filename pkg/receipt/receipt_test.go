package receipt_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

func cur(epoch, seq int64, msg string) receipt.Cursor {
	return receipt.Cursor{Position: receipt.Position{Epoch: epoch, Seq: seq}, MessageID: msg}
}

func TestPositionCompare(t *testing.T) {
	t.Parallel()
	p := func(e, s int64) receipt.Position { return receipt.Position{Epoch: e, Seq: s} }
	require.Equal(t, 0, p(0, 5).Compare(p(0, 5)))
	require.Equal(t, -1, p(0, 5).Compare(p(0, 6)))
	require.Equal(t, 1, p(1, 1).Compare(p(0, 1<<62)), "epoch dominates seq")
	require.Equal(t, -1, p(0, 1<<62).Compare(p(1, 0)))
}

func TestMergeKeepsMessageIDWithItsSeq(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	stored := receipt.State{Key: k, Read: cur(0, 10, "m10"), Delivered: cur(0, 10, "m10"), DeviceID: "a", UpdatedAtUnixMs: 1}
	in := receipt.State{Key: k, Read: cur(0, 8, "m8"), Delivered: cur(0, 12, "m12"), DeviceID: "b", UpdatedAtUnixMs: 2}
	got, advanced := receipt.Merge(stored, in)
	require.True(t, advanced)
	require.Equal(t, cur(0, 10, "m10"), got.Read)
	require.Equal(t, cur(0, 12, "m12"), got.Delivered)
	require.Equal(t, "b", got.DeviceID)

	again, advanced := receipt.Merge(got, in)
	require.False(t, advanced, "a duplicate is a no-op")
	require.Equal(t, got, again)
}

func TestMergeReadImpliesDelivered(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	got, _ := receipt.Merge(receipt.State{Key: k, Delivered: cur(0, 3, "m3")}, receipt.State{Key: k, Read: cur(0, 9, "m9")})
	require.Equal(t, cur(0, 9, "m9"), got.Delivered)
}

// Reading implies delivery by seq, not by (epoch, seq): a read at a bumped
// epoch and a lower seq never drags delivered back, delivered keeps its
// epoch, and even a stale read (one that loses to the current epoch) still
// proves delivery up to its seq.
func TestReadImpliesDeliveryBySeq(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	st := receipt.State{Key: k, Read: cur(0, 10, "m10"), Delivered: cur(0, 10, "m10")}
	st, moved := receipt.Merge(st, receipt.MarkUnread(st, 5))
	require.True(t, moved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 4}, st.Read.Position)
	require.Equal(t, cur(0, 10, "m10"), st.Delivered, "delivered never moves back")

	// A read of the new epoch past delivered raises delivered's seq only.
	st, _ = receipt.Merge(st, receipt.State{Key: k, Read: cur(1, 12, "m12")})
	require.Equal(t, cur(1, 12, "m12"), st.Read)
	require.Equal(t, cur(0, 12, "m12"), st.Delivered)

	// A stale read (epoch 0) ahead of delivered: the read cursor stays, the
	// delivery it proves counts.
	st, moved = receipt.Merge(st, receipt.State{Key: k, Read: cur(0, 15, "m15")})
	require.True(t, moved)
	require.Equal(t, cur(1, 12, "m12"), st.Read)
	require.Equal(t, cur(0, 15, "m15"), st.Delivered)

	// A private read proves nothing to others: delivered does not move.
	st, moved = receipt.Merge(st, receipt.State{Key: k, PrivateRead: cur(1, 20, "m20")})
	require.True(t, moved)
	require.Equal(t, cur(0, 15, "m15"), st.Delivered)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 20}, st.EffectiveRead())
}

// The mark-unread epoch race: after a mark-unread, a stale ack of the old
// epoch arriving late is ignored, while a new read at the new epoch
// advances.
func TestMarkUnreadEpochRace(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	st, _ := receipt.Merge(receipt.State{}, receipt.State{Key: k, Read: cur(0, 50, "m50"), PrivateRead: cur(0, 60, ""), Delivered: cur(0, 50, "m50")})
	require.Equal(t, int64(0), st.ReadEpoch())
	unread := receipt.MarkUnread(st, 40)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 39}, unread.Read.Position)
	st, moved := receipt.Merge(st, unread)
	require.True(t, moved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 39}, st.EffectiveRead(), "the private read moves back too")
	require.True(t, st.PrivateRead.Position.IsZero(), "a private read not ahead of the public one is dropped")

	st2, _ := receipt.Merge(st, receipt.State{Key: k, Read: cur(0, 55, "m55")})
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 39}, st2.Read.Position, "a stale ack of the old epoch is ignored")
	require.Equal(t, int64(55), st2.Delivered.Position.Seq)

	st3, moved := receipt.Merge(st2, receipt.State{Key: k, Read: cur(1, 45, "m45")})
	require.True(t, moved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 45}, st3.Read.Position, "a read at the new epoch advances")

	require.Equal(t, receipt.Position{Epoch: 2, Seq: 0}, receipt.MarkUnread(st3, 1).Read.Position)
}

// Private vs public: a private read moves the user's effective read (what
// counts use) but not the public cursor; the greater of both counts.
func TestPrivateRead(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	st, _ := receipt.Merge(receipt.State{}, receipt.State{Key: k, Read: cur(0, 10, "m10")})
	st, moved := receipt.Merge(st, receipt.State{Key: k, PrivateRead: cur(0, 30, "")})
	require.True(t, moved)
	require.Equal(t, receipt.Position{Seq: 10}, st.Read.Position, "the public cursor does not move")
	require.Equal(t, receipt.Position{Seq: 30}, st.EffectiveRead())
	require.Equal(t, int64(10), st.Delivered.Position.Seq)

	st, _ = receipt.Merge(st, receipt.State{Key: k, Read: cur(0, 40, "m40")})
	require.True(t, st.PrivateRead.Position.IsZero(), "a public read past the private one drops it")
	require.Equal(t, receipt.Position{Seq: 40}, st.EffectiveRead())

	_, moved = receipt.Merge(st, receipt.State{Key: k, PrivateRead: cur(0, 35, "")})
	require.False(t, moved, "a private read behind the public one changes nothing")
}

// The max-register laws, checked on random states: merging in any order, with
// any duplicates, gives the same cursors.
func TestMergeIsOrderInsensitive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	k := receipt.Key{User: "u", Channel: "c"}
	for trial := 0; trial < 500; trial++ {
		events := make([]receipt.State, 1+rng.IntN(12))
		for i := range events {
			// Delivered epochs are always 0: there is no mark-undelivered.
			events[i] = receipt.State{Key: k, Read: cur(rng.Int64N(3), rng.Int64N(20), "r"), Delivered: cur(0, rng.Int64N(20), "d")}
			if rng.IntN(3) == 0 {
				events[i].PrivateRead = cur(rng.Int64N(3), rng.Int64N(20), "")
			}
		}
		fold := func(order []int) receipt.State {
			var s receipt.State
			for _, i := range order {
				s, _ = receipt.Merge(s, events[i])
			}
			return s
		}
		order := rng.Perm(len(events))
		dup := append(append([]int{}, order...), order[:len(order)/2]...)
		rng.Shuffle(len(dup), func(i, j int) { dup[i], dup[j] = dup[j], dup[i] })
		a, b := fold(order), fold(dup)
		require.True(t, a.SameCursors(b), "trial %d: %+v vs %+v", trial, a, b)
		for _, e := range events {
			require.True(t, a.Covers(e), "trial %d: %+v does not cover %+v", trial, a, e)
			require.GreaterOrEqual(t, a.Delivered.Position.Seq, e.Read.Position.Seq, "reading implies delivery")
		}
	}
}

func TestKafkaKeyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  receipt.Key
		want string
	}{
		{receipt.Key{User: "alice", Channel: "general"}, "alice:general"},
		{receipt.Key{User: "@alice:example.org", Channel: "!room:example.org"}, "@alice%3Aexample.org:!room%3Aexample.org"},
		{receipt.Key{User: "100%", Channel: "a%3Ab"}, "100%25:a%253Ab"},
		{receipt.Key{User: "urn:x:y", Channel: "#c/d"}, "urn%3Ax%3Ay:#c/d"},
	} {
		require.Equal(t, c.want, c.key.KafkaKey())
		require.Equal(t, len(c.want), c.key.KafkaKeyLen())
		require.Equal(t, c.want, string(c.key.AppendKafkaKey([]byte{})))
		require.Equal(t, 1, strings.Count(c.key.KafkaKey(), ":"), "one unescaped ':'")
		got, ok := receipt.ParseKafkaKey(c.want)
		require.True(t, ok, c.want)
		require.Equal(t, c.key, got)
	}
	for _, bad := range []string{"", "nocolon", ":c", "u:", "a:b:c", "a%:b", "a%3a:b", "a%2:b", "a:b%"} {
		_, ok := receipt.ParseKafkaKey(bad)
		require.False(t, ok, bad)
	}
}

func TestLegacyKafkaKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "100%:c", receipt.Key{User: "100%", Channel: "c"}.LegacyKafkaKey())
	require.Empty(t, receipt.Key{User: "a:b", Channel: "c"}.LegacyKafkaKey(), "no record was written with a raw ':' in an id")
	require.Empty(t, receipt.Key{User: "a", Channel: "c:d"}.LegacyKafkaKey())
}

func FuzzEscapeKeyID(f *testing.F) {
	for _, s := range []string{"", "a", "@a:b", "%", "%25", "%3A", "::%%", "é:%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		esc := receipt.EscapeKeyID(id)
		require.NotContains(t, esc, ":")
		require.Equal(t, len(esc), receipt.KeyIDLen(id))
		got, ok := receipt.UnescapeKeyID(esc)
		require.True(t, ok, "%q", esc)
		require.Equal(t, id, got)
		// One spelling per id: whatever unescapes escapes back to itself.
		if back, ok := receipt.UnescapeKeyID(id); ok {
			require.Equal(t, id, receipt.EscapeKeyID(back))
		}
	})
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id     string
		reason string // substring; "" means valid
	}{
		{"u1", ""},
		{"élève-42_x.y@z", ""},
		{strings.Repeat("a", receipt.MaxIDLength), ""},
		{"", "is required"},
		{strings.Repeat("a", receipt.MaxIDLength+1), "limit is 128"},
		{"@alice:example.org", ""},
		{"!room:example.org", ""},
		{"urn:tenant:42/a#b%c", ""},
		{"a:", ""},
		{":a", "starts with ':'"},
		{":loaded", "starts with ':'"},
		{"a b", "whitespace"},
		{"a\x00b", "control"},
		{"a\x7fb", "control"},
		{"a\u200bb", "non-printable"},
		{"\xff", "UTF-8"},
		{"a{b}", "contains '{' at byte 1"},
		{"ab}", "contains '}' at byte 2"},
		{"{x}", "hash tags"},
	}
	for _, c := range cases {
		err := receipt.ValidateID("user_id", c.id)
		if c.reason == "" {
			require.NoError(t, err, "%q", c.id)
			continue
		}
		require.ErrorContains(t, err, c.reason, "%q", c.id)
		require.ErrorContains(t, err, "user_id", "the error names the field")
	}
	require.NoError(t, receipt.ValidateOptionalID("device_id", ""))
	// Braces matter only in the ids that name keys: an optional id (a
	// message's, a device's) may hold them.
	require.NoError(t, receipt.ValidateOptionalID("message_id", "{m}"))
	// A leading ':' matters only in hash field names: a message id may
	// start with one.
	require.NoError(t, receipt.ValidateOptionalID("message_id", ":m:1"))
	require.ErrorContains(t, receipt.ValidateOptionalID("device_id", "d\tx"), "whitespace")
	require.Error(t, receipt.ValidateSeq("seq", 0))
	require.Error(t, receipt.ValidateSeq("seq", -1))
	require.NoError(t, receipt.ValidateSeq("seq", 1<<62))
}

// TestEpochBounds: an explicit epoch may not be ahead of the stored read
// epoch (only mark-unread moves it) and never past MaxEpoch, in any state
// that travels between stores.
func TestEpochBounds(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	stored := receipt.State{Key: k, Read: cur(0, 900, "m")}
	require.True(t, receipt.EpochAhead(stored, receipt.State{Key: k, Read: cur(5, 1, "")}))
	require.True(t, receipt.EpochAhead(stored, receipt.State{Key: k, PrivateRead: cur(1, 1, "")}))
	require.False(t, receipt.EpochAhead(stored, receipt.State{Key: k, Read: cur(0, 1, "")}))
	require.False(t, receipt.EpochAhead(stored, receipt.State{Key: k, Read: cur(receipt.EpochCurrent, 1, "")}))
	require.False(t, receipt.EpochAhead(stored, receipt.State{Key: k, Delivered: cur(0, 1000, "")}))
	require.True(t, receipt.CanMarkUnread(receipt.State{Read: cur(receipt.MaxEpoch-1, 1, "")}))
	require.False(t, receipt.CanMarkUnread(receipt.State{Read: cur(receipt.MaxEpoch, 1, "")}))

	require.NoError(t, receipt.State{Key: k, Read: cur(receipt.MaxEpoch, 1, "")}.Validate())
	require.Error(t, receipt.State{Key: k, Read: cur(receipt.MaxEpoch+1, 1, "")}.Validate())
	require.Error(t, receipt.State{Key: k, PrivateRead: cur(1<<63-1, 1, "")}.Validate())
}
