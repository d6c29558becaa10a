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
// epoch, and even a stale read (one that loses to the current epoch in the
// user's own view) still proves delivery up to its seq.
func TestReadImpliesDeliveryBySeq(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	st := receipt.State{Key: k, Read: cur(0, 10, "m10"), Delivered: cur(0, 10, "m10")}
	st, moved := receipt.Merge(st, receipt.MarkUnread(k, 5, st.ReadEpoch()))
	require.True(t, moved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 4}, st.EffectiveRead())
	require.Equal(t, cur(0, 10, "m10"), st.Read, "the public read never moves back")
	require.Equal(t, cur(0, 10, "m10"), st.Delivered, "delivered never moves back")

	// A read of the new epoch past delivered raises delivered's seq only.
	st, _ = receipt.Merge(st, receipt.State{Key: k, Read: cur(1, 12, "m12")})
	require.Equal(t, cur(1, 12, "m12"), st.Read)
	require.Equal(t, cur(0, 12, "m12"), st.Delivered)

	// A stale read (epoch 0) ahead of delivered: the user's own position
	// stays, the public read and the delivery it proves count.
	st, moved = receipt.Merge(st, receipt.State{Key: k, Read: cur(0, 15, "m15")})
	require.True(t, moved)
	require.Equal(t, cur(0, 15, "m15"), st.Read)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 12}, st.EffectiveRead())
	require.Equal(t, cur(0, 15, "m15"), st.Delivered)

	// A private read proves nothing to others: delivered does not move.
	st, moved = receipt.Merge(st, receipt.State{Key: k, PrivateRead: cur(1, 20, "m20")})
	require.True(t, moved)
	require.Equal(t, cur(0, 15, "m15"), st.Delivered)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 20}, st.EffectiveRead())
}

// Mark-unread is private and idempotent, and the epoch race still holds
// in the user's own view: public (0,100); mark-unread at 50 -> own (1,49),
// public 100; a read at 60 of the new epoch -> own 60, public 100; a stale
// ack (0,110) -> public 110 (the user did read it), own still 60; a read at
// 120 of the new epoch -> both 120, the private cursor dropped.
func TestMarkUnreadIsPrivate(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	st, _ := receipt.Merge(receipt.State{}, receipt.State{Key: k, Read: cur(0, 100, "m100"), Delivered: cur(0, 100, "m100")})
	require.Equal(t, int64(0), st.ReadEpoch())
	unread := receipt.MarkUnread(k, 50, st.ReadEpoch())
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 49}, unread.PrivateRead.Position)
	require.True(t, unread.Read.Position.IsZero(), "a mark-unread carries no public read")
	st, moved := receipt.Merge(st, unread)
	require.True(t, moved)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 49}, st.EffectiveRead())
	require.Equal(t, cur(0, 100, "m100"), st.Read, "others still see the read at 100")
	require.Equal(t, int64(1), st.ReadEpoch())

	// The same call repeated (same seq, same epoch seen) changes nothing;
	// one that saw the new epoch moves on to the next.
	again, moved := receipt.Merge(st, receipt.MarkUnread(k, 50, 0))
	require.False(t, moved, "a retried mark-unread is a no-op")
	require.Equal(t, st, again)
	next, _ := receipt.Merge(st, receipt.MarkUnread(k, 30, st.ReadEpoch()))
	require.Equal(t, receipt.Position{Epoch: 2, Seq: 29}, next.EffectiveRead())

	// A stale ack of the old epoch (in flight before the mark-unread)
	// moves the public read, not the user's own view.
	stale, moved := receipt.Merge(st, receipt.State{Key: k, Read: cur(0, 110, "m110")})
	require.True(t, moved)
	require.Equal(t, cur(0, 110, "m110"), stale.Read)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 49}, stale.EffectiveRead(), "a stale ack does not undo the mark-unread")

	st, moved = receipt.Merge(st, receipt.State{Key: k, Read: cur(1, 60, "m60")})
	require.True(t, moved)
	require.Equal(t, cur(0, 100, "m100"), st.Read, "a read below the public seq does not move it")
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 60}, st.EffectiveRead())

	st, _ = receipt.Merge(st, receipt.State{Key: k, Read: cur(1, 120, "m120")})
	require.Equal(t, cur(1, 120, "m120"), st.Read)
	require.True(t, st.PrivateRead.Position.IsZero(), "a private read not ahead of the public one is dropped")
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 120}, st.EffectiveRead())

	// A stale ack above the public seq after the read caught up: public
	// moves, the own position stays (it is kept as the private cursor).
	st, _ = receipt.Merge(st, receipt.State{Key: k, Read: cur(0, 130, "m130")})
	require.Equal(t, cur(0, 130, "m130"), st.Read)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 120}, st.EffectiveRead())
}

// A state an older build stored, its public read moved back by a
// mark-unread at epoch 1, keeps working: the user's view stays, and a stale
// ack of epoch 0 may now win publicly.
func TestMarkUnreadOlderBuildState(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	old := receipt.State{Key: k, Read: cur(1, 49, ""), Delivered: cur(0, 100, "m100")}
	st, _ := receipt.Merge(old, receipt.State{Key: k, Read: cur(0, 110, "m110")})
	require.Equal(t, cur(0, 110, "m110"), st.Read)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 49}, st.EffectiveRead())
	st, _ = receipt.Merge(st, receipt.State{Key: k, Read: cur(1, 120, "m120")})
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 120}, st.EffectiveRead())
	require.True(t, st.PrivateRead.Position.IsZero())
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
// any duplicates and any grouping, gives the same cursors; the public read is
// the greatest read by (seq, epoch), the own position the greatest read or
// private read by (epoch, seq).
func TestMergeIsOrderInsensitive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	k := receipt.Key{User: "u", Channel: "c"}
	random := func() receipt.State {
		// Delivered epochs are always 0: there is no mark-undelivered.
		st := receipt.State{Key: k, Read: cur(rng.Int64N(3), rng.Int64N(20), "r"), Delivered: cur(0, rng.Int64N(20), "d")}
		switch rng.IntN(4) {
		case 0:
			st.PrivateRead = cur(rng.Int64N(3), rng.Int64N(20), "")
		case 1: // a mark-unread
			st = receipt.MarkUnread(k, 1+rng.Int64N(20), rng.Int64N(3))
		}
		return st
	}
	merge := func(a, b receipt.State) receipt.State { m, _ := receipt.Merge(a, b); return m }
	for trial := 0; trial < 2000; trial++ {
		events := make([]receipt.State, 1+rng.IntN(12))
		for i := range events {
			events[i] = random()
		}
		fold := func(order []int) receipt.State {
			var s receipt.State
			for _, i := range order {
				s = merge(s, events[i])
			}
			return s
		}
		order := rng.Perm(len(events))
		dup := append(append([]int{}, order...), order[:len(order)/2]...)
		rng.Shuffle(len(dup), func(i, j int) { dup[i], dup[j] = dup[j], dup[i] })
		a, b := fold(order), fold(dup)
		require.True(t, a.SameCursors(b), "trial %d: %+v vs %+v", trial, a, b)
		var public, own receipt.Position
		for _, e := range events {
			require.True(t, a.Covers(e), "trial %d: %+v does not cover %+v", trial, a, e)
			require.GreaterOrEqual(t, a.Delivered.Position.Seq, e.Read.Position.Seq, "reading implies delivery")
			if e.Read.Position.CompareBySeq(public) > 0 {
				public = e.Read.Position
			}
			own = receipt.MaxCursor(receipt.Cursor{Position: own}, receipt.MaxCursor(e.Read, e.PrivateRead)).Position
		}
		require.Equal(t, public, a.Read.Position, "trial %d: the public read is the greatest by seq", trial)
		require.Equal(t, own, a.EffectiveRead(), "trial %d: the own position is the greatest by epoch", trial)

		// Associativity and commutativity on three states (each possibly
		// already a merge, so carrying a private cursor behind its read).
		x, y, z := merge(random(), random()), merge(random(), random()), random()
		l, r := merge(merge(x, y), z), merge(x, merge(y, z))
		require.True(t, l.SameCursors(r), "trial %d: (x+y)+z %+v vs x+(y+z) %+v", trial, l, r)
		require.True(t, merge(x, y).SameCursors(merge(y, x)), "trial %d: x+y vs y+x", trial)
		require.True(t, merge(x, x).SameCursors(x), "trial %d: x+x vs x", trial)
	}
}

// The ordering that makes the laws hold: were the own position only the
// greater of the private cursors (not of the reads too), a private cursor
// dropped behind a read of the new epoch would be lost once a stale read
// with a higher seq takes the public cursor, and the grouping would matter.
func TestMergeAssociativeAcrossPublicOrders(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	a := receipt.State{Key: k, Read: cur(1, 120, "m120")}
	b := receipt.State{Key: k, PrivateRead: cur(1, 110, "")}
	c := receipt.State{Key: k, Read: cur(0, 130, "m130")}
	ab, _ := receipt.Merge(a, b)
	l, _ := receipt.Merge(ab, c)
	bc, _ := receipt.Merge(b, c)
	r, _ := receipt.Merge(a, bc)
	require.True(t, l.SameCursors(r), "%+v vs %+v", l, r)
	require.Equal(t, receipt.Position{Epoch: 1, Seq: 120}, l.EffectiveRead())
	require.Equal(t, receipt.Position{Epoch: 0, Seq: 130}, l.Read.Position)
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
	// Seqs are exact in doubles (Lua, JavaScript): 1 … 2^53−1.
	require.NoError(t, receipt.ValidateSeq("seq", receipt.MaxSeq))
	require.ErrorContains(t, receipt.ValidateSeq("seq", receipt.MaxSeq+1), "must be between 1 and 9007199254740991")
	require.Error(t, receipt.ValidateSeq("seq", 1<<62))
	st := receipt.State{Key: receipt.Key{User: "u", Channel: "c"}, Read: receipt.Cursor{Position: receipt.Position{Seq: receipt.MaxSeq + 1}}}
	require.ErrorContains(t, st.Validate(), "read.seq")
	st.Read.Position.Seq, st.UpdatedAtUnixMs = receipt.MaxSeq, receipt.MaxSeq+1
	require.ErrorContains(t, st.Validate(), "updated_at")
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
	require.True(t, receipt.CanMarkUnread(receipt.MaxEpoch-1))
	require.False(t, receipt.CanMarkUnread(receipt.MaxEpoch))

	require.NoError(t, receipt.State{Key: k, Read: cur(receipt.MaxEpoch, 1, "")}.Validate())
	require.Error(t, receipt.State{Key: k, Read: cur(receipt.MaxEpoch+1, 1, "")}.Validate())
	require.Error(t, receipt.State{Key: k, PrivateRead: cur(1<<63-1, 1, "")}.Validate())
}
