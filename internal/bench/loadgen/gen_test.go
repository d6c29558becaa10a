package loadgen

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/receipt"
)

func genConfig(c Config) Config {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

func TestGeneratorShares(t *testing.T) {
	t.Parallel()
	cfg := genConfig(Config{Users: 200, Channels: 20, Dup: 0.2, Reorder: 0.1, DeliveredShare: 0.25, Seed: 7})
	g := NewGenerator(cfg)
	const n = 50000
	last := map[receipt.Key]int64{}
	seen := map[Event]bool{}
	var dups, lower, delivered int
	for range n {
		e := g.Next()
		require.NoError(t, receipt.ValidateID("user", e.Key.User))
		require.NoError(t, receipt.ValidateID("channel", e.Key.Channel))
		require.NoError(t, receipt.ValidateSeq("seq", e.Seq))
		if seen[e] {
			dups++
		} else if e.Seq < last[e.Key] {
			lower++
		}
		seen[e] = true
		last[e.Key] = max(last[e.Key], e.Seq)
		if e.Kind == KindDelivered {
			delivered++
		}
	}
	share := func(k int) float64 { return float64(k) / n }
	// Resends are exact copies. Reorders draw from [1, last): a key's first
	// event cannot be one, and a few land on an earlier event exactly.
	require.InDelta(t, 0.2, share(dups), 0.03)
	require.InDelta(t, 0.1, share(lower), 0.035)
	require.InDelta(t, 0.3, share(dups+lower), 0.03)
	require.InDelta(t, 0.25, share(delivered), 0.02)
}

func TestGeneratorDeterministicAndSkewed(t *testing.T) {
	t.Parallel()
	cfg := genConfig(Config{Users: 1000, Channels: 50, Zipf: 1.2, Seed: 42})
	a, b := NewGenerator(cfg), NewGenerator(cfg)
	counts := map[string]int{}
	for range 20000 {
		ea, eb := a.Next(), b.Next()
		require.Equal(t, ea, eb)
		counts[ea.Key.User]++
	}
	// With s = 1.2 the hottest user takes far more than a uniform 1/1000.
	require.Greater(t, counts["u0"], 20000/100)
	require.Greater(t, counts["u0"], counts["u10"])

	other := NewGenerator(genConfig(Config{Users: 1000, Channels: 50, Zipf: 1.2, Seed: 43}))
	diff := 0
	for range 100 {
		if a.Next() != other.Next() {
			diff++
		}
	}
	require.Greater(t, diff, 50, "another seed gives another stream")
}

func TestEventState(t *testing.T) {
	t.Parallel()
	k := receipt.Key{User: "u", Channel: "c"}
	read := Event{Key: k, Kind: KindRead, Seq: 5, MessageID: "m5", DeviceID: "d0"}.State()
	require.EqualValues(t, 5, read.Read.Position.Seq)
	require.EqualValues(t, 5, read.Delivered.Position.Seq, "reading implies delivery")
	deliv := Event{Key: k, Kind: KindDelivered, Seq: 9, MessageID: "m9"}.State()
	require.Zero(t, deliv.Read.Position.Seq)
	require.EqualValues(t, 9, deliv.Delivered.Position.Seq)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Config{}.WithDefaults().Validate())
	bad := Config{Target: "ftp://x", Zipf: 0.5, Dup: 0.7, Reorder: 0.6, Batch: -1, UserPrefix: "a b"}.WithDefaults()
	err := bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"target", "zipf", "dup + reorder", "batch", "prefix"} {
		require.ErrorContains(t, err, want)
	}
	require.ErrorContains(t, Config{Lag: &LagConfig{}}.WithDefaults().Validate(), "Get")
	require.NoError(t, Config{UserPrefix: "@u:x.org-", ChannelPrefix: "!c:x.org-"}.WithDefaults().Validate(), "Matrix-style prefixes")
	require.ErrorContains(t, Config{UserPrefix: "a/"}.WithDefaults().Validate(), "must escape")
}

func TestLastSeqsDenseAndSparseAgree(t *testing.T) {
	dense, sparse := newLastSeqs(1000), newLastSeqs(denseKeysMax+1)
	require.NotNil(t, dense.dense)
	require.NotNil(t, sparse.sparse)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		i := rng.Int64N(1000)
		require.Equal(t, dense.get(i), sparse.get(i))
		seq := dense.get(i) + 1 + rng.Int64N(3)
		dense.set(i, seq)
		sparse.set(i, seq)
	}
	for i := range int64(1000) {
		require.Equal(t, dense.get(i), sparse.get(i))
	}
}
