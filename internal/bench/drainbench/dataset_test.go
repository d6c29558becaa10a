package drainbench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

func smallConfig(seed uint64) DataConfig {
	c := DefaultDataConfig()
	c.Seed, c.Events, c.Users, c.Channels = seed, 20_000, 2_000, 10
	return c
}

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	a, err := Generate(smallConfig(7))
	require.NoError(t, err)
	b, err := Generate(smallConfig(7))
	require.NoError(t, err)
	require.Equal(t, a.Events, b.Events)
	c, err := Generate(smallConfig(8))
	require.NoError(t, err)
	require.NotEqual(t, a.Events, c.Events, "another seed, another stream")

	// The stream is pinned: a change to the model or its randomness shows
	// here (and changes every figure measured on the set).
	require.Equal(t, Event{Seq: 3, AtMs: StartUnixMs, User: 29, Chan: 0, Device: 1, Kind: KindAdvance}, a.Events[0])
	require.Equal(t, 4_530, len(a.Finals(len(a.Events))))
}

// TestDefaultSetKeyCount pins the default data set: 1M events over 100k
// users × 20 channels at s = 1.1 (the reference generator gave 179,668 keys).
func TestDefaultSetKeyCount(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 1M events")
	}
	t.Parallel()
	d, err := Generate(DefaultDataConfig())
	require.NoError(t, err)
	require.Len(t, d.Events, 1_000_000)
	keys := map[uint64]struct{}{}
	for _, e := range d.Events {
		keys[d.KeyID(e)] = struct{}{}
	}
	require.Len(t, keys, 180_917)
}

// TestGenerateModel checks the documented model on every event: per key,
// an advance moves 1–3 past the latest, a resend repeats the latest (seq
// and device), a late event lies 1–LateWindow below it; the shares are
// near the configured ones; the accepted-at times advance with the stream.
func TestGenerateModel(t *testing.T) {
	t.Parallel()
	cfg := smallConfig(3)
	d, err := Generate(cfg)
	require.NoError(t, err)
	type latest struct {
		seq    int64
		device uint8
	}
	last := map[uint64]latest{}
	var dups, late int
	for i, e := range d.Events {
		id := d.KeyID(e)
		l := last[id]
		require.Equal(t, StartUnixMs+int64(i)/EventsPerMs, e.AtMs)
		require.Less(t, int(e.Device), cfg.Devices)
		switch e.Kind {
		case KindAdvance:
			require.GreaterOrEqual(t, e.Seq-l.seq, int64(1), "event %d", i)
			require.LessOrEqual(t, e.Seq-l.seq, int64(3), "event %d", i)
			last[id] = latest{e.Seq, e.Device}
		case KindDup:
			dups++
			require.Equal(t, l.seq, e.Seq, "event %d", i)
			require.Equal(t, l.device, e.Device, "event %d", i)
		case KindLate:
			late++
			require.Less(t, e.Seq, l.seq, "event %d", i)
			require.GreaterOrEqual(t, e.Seq, max(1, l.seq-LateWindow), "event %d", i)
		default:
			t.Fatalf("event %d: kind %d", i, e.Kind)
		}
	}
	// Resends and late events need an earlier mark of their key, so the
	// shares fall a little below the configured ones.
	share := func(n int) float64 { return float64(n) / float64(len(d.Events)) }
	require.InDelta(t, cfg.Dup, share(dups), 0.05)
	require.InDelta(t, cfg.Late, share(late), 0.03)
}

// TestZipfTable: the draws follow (k+1)^-s.
func TestZipfTable(t *testing.T) {
	t.Parallel()
	const n, s, draws = 20, 1.1, 200_000
	z := newZipfTable(n, s)
	require.Equal(t, 1.0, z[n-1])
	require.Equal(t, 0, z.draw(0))
	require.Equal(t, n-1, z.draw(math.Nextafter(1, 0)))
	r := newStream(1)
	counts := make([]int, n)
	for range draws {
		counts[z.draw(r.float())]++
	}
	var norm float64
	for k := range n {
		norm += math.Pow(float64(k+1), -s)
	}
	for k, c := range counts {
		want := math.Pow(float64(k+1), -s) / norm
		require.InDelta(t, want, float64(c)/draws, 0.01, "rank %d", k)
	}
	require.Greater(t, counts[0], counts[1])
}

// TestRecordsDecodeAsProduction: every record goes through the real codec
// and decodes to the event's state, under the key "user:channel".
func TestRecordsDecodeAsProduction(t *testing.T) {
	t.Parallel()
	d, err := Generate(smallConfig(5))
	require.NoError(t, err)
	for i := 0; i < len(d.Events); i += 97 {
		rec, err := d.Record(i)
		require.NoError(t, err)
		st := d.State(i)
		require.Equal(t, st.Key.KafkaKey(), string(rec.Key))
		got, err := event.Decode(rec)
		require.NoError(t, err)
		require.Equal(t, st, got)
		require.Equal(t, st.Read, st.Delivered, "a READ mark raises both cursors")
	}
}

// TestFinals checks the fold against a direct computation: per key, the
// greatest seq, with the device and time of its first occurrence (later
// resends of it change nothing), and LastAdvance naming that event.
func TestFinals(t *testing.T) {
	t.Parallel()
	d, err := Generate(smallConfig(11))
	require.NoError(t, err)
	type want struct {
		seq   int64
		first int
	}
	w := map[uint64]want{}
	for i, e := range d.Events {
		id := d.KeyID(e)
		if cur, ok := w[id]; !ok || e.Seq > cur.seq {
			w[id] = want{e.Seq, i}
		}
	}
	finals := d.Finals(len(d.Events))
	require.Len(t, finals, len(w))
	for j, f := range finals {
		if j > 0 {
			require.Less(t, finals[j-1].KeyID, f.KeyID, "sorted by key id")
		}
		x := w[f.KeyID]
		require.Equal(t, x.first, f.LastAdvance)
		first := d.State(x.first)
		require.Equal(t, first, f.State)
		require.Equal(t, x.seq, f.State.Read.Position.Seq)
	}

	// A prefix folds only its events.
	prefix := d.Finals(100)
	for _, f := range prefix {
		require.Less(t, f.LastAdvance, 100)
	}

	// By hand: a late event and a resend after the max change nothing.
	hand := &Dataset{Config: DataConfig{Channels: 1}, Events: []Event{
		{Seq: 1, AtMs: 10, Device: 0},
		{Seq: 4, AtMs: 11, Device: 1},
		{Seq: 2, AtMs: 12, Device: 2, Kind: KindLate},
		{Seq: 4, AtMs: 13, Device: 1, Kind: KindDup},
	}}
	hf := hand.Finals(4)
	require.Len(t, hf, 1)
	c := receipt.Cursor{Position: receipt.Position{Seq: 4}, MessageID: "m4"}
	require.Equal(t, receipt.State{Key: receipt.Key{User: "u0", Channel: "c0"}, Read: c, Delivered: c, DeviceID: "d1", UpdatedAtUnixMs: 11}, hf[0].State)
	require.Equal(t, 1, hf[0].LastAdvance)
}

func TestStats(t *testing.T) {
	t.Parallel()
	d, err := Generate(smallConfig(2))
	require.NoError(t, err)
	finals := d.Finals(len(d.Events))
	s := d.Stats(finals)
	require.Equal(t, len(d.Events), s.Events)
	require.Equal(t, len(finals), s.DistinctKeys)
	require.Equal(t, s.Events, s.Advancing+s.Dups+s.Late, "every event advances, resends or is late")
	var sum int64
	for _, f := range finals {
		sum += f.State.Read.Position.Seq
	}
	require.Equal(t, sum, s.SumReadSeq)
	require.Greater(t, s.Top1PctKeysShare, 0.1, "skewed")
	require.Greater(t, s.MeanValueBytes, 10.0)
}

func TestDataConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultDataConfig().Validate())
	bad := DataConfig{Events: 0, Users: 0, Channels: 1, Zipf: 0, Dup: 0.8, Late: 0.3, Devices: 0}
	err := bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"events", "users", "zipf", "dup", "devices"} {
		require.ErrorContains(t, err, want)
	}
}
