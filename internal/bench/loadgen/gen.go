package loadgen

import (
	"math/rand/v2"
	"strconv"

	"github.com/readstate/receipts/pkg/receipt"
)

// Kind is the cursor a mark moves, spelled as in the JSON API.
type Kind string

// Kinds.
const (
	KindRead      Kind = "READ"
	KindDelivered Kind = "DELIVERED"
)

// Event is one generated mark.
type Event struct {
	Key       receipt.Key
	Kind      Kind
	Seq       int64
	MessageID string
	DeviceID  string
	// index numbers the key within the run (user*channels+channel).
	index int64
}

// State is the stored state an acknowledged event guarantees at least:
// reading implies delivery, so a read raises both cursors.
func (e Event) State() receipt.State {
	c := receipt.Cursor{Position: receipt.Position{Seq: e.Seq}, MessageID: e.MessageID}
	st := receipt.State{Key: e.Key, Delivered: c, DeviceID: e.DeviceID}
	if e.Kind == KindRead {
		st.Read = c
	}
	return st
}

// recentEvents is how many past events a duplicate is drawn from: enough to
// spread duplicates over many keys, few enough to keep them "recent".
const recentEvents = 4096

// Generator produces the event stream of one run. It is deterministic for a
// given Config (with the same Seed) and not safe for concurrent use.
type Generator struct {
	cfg      Config
	rng      *rand.Rand
	userZipf *rand.Zipf
	chanZipf *rand.Zipf
	users    []string
	channels []string
	devices  []string
	// last is the greatest seq generated per key (index user*channels+channel).
	last   lastSeqs
	recent []Event
	next   int // ring position in recent
}

// NewGenerator returns the generator for cfg; cfg must be valid (see
// Config.WithDefaults and Validate).
func NewGenerator(cfg Config) *Generator {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x726563656970747))
	g := &Generator{cfg: cfg, rng: rng, last: newLastSeqs(int64(cfg.Users) * int64(cfg.Channels))}
	if cfg.Zipf > 1 {
		g.userZipf = rand.NewZipf(rng, cfg.Zipf, 1, uint64(cfg.Users-1))
		g.chanZipf = rand.NewZipf(rng, cfg.Zipf, 1, uint64(cfg.Channels-1))
	}
	g.users = ids(cfg.UserPrefix, cfg.Users)
	g.channels = ids(cfg.ChannelPrefix, cfg.Channels)
	g.devices = ids("d", cfg.Devices)
	return g
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func (g *Generator) pick(z *rand.Zipf, n int) int {
	if z != nil {
		return int(z.Uint64())
	}
	return g.rng.IntN(n)
}

// Next returns the next event: with probability Dup an exact resend of a
// recent event, with probability Reorder a seq below the last one sent for
// its key, otherwise a seq 1–3 past it.
func (g *Generator) Next() Event {
	r := g.rng.Float64()
	if r < g.cfg.Dup && len(g.recent) > 0 {
		return g.recent[g.rng.IntN(len(g.recent))]
	}
	u, c := g.pick(g.userZipf, g.cfg.Users), g.pick(g.chanZipf, g.cfg.Channels)
	idx := int64(u)*int64(g.cfg.Channels) + int64(c)
	last := g.last.get(idx)
	var seq int64
	if r < g.cfg.Dup+g.cfg.Reorder && last > 1 {
		seq = 1 + g.rng.Int64N(last-1)
	} else {
		seq = last + 1 + g.rng.Int64N(3)
		g.last.set(idx, seq)
	}
	kind := KindRead
	if g.rng.Float64() < g.cfg.DeliveredShare {
		kind = KindDelivered
	}
	ev := Event{
		Key:       receipt.Key{User: g.users[u], Channel: g.channels[c]},
		Kind:      kind,
		Seq:       seq,
		MessageID: "m" + strconv.FormatInt(seq, 10),
		DeviceID:  g.devices[g.rng.IntN(len(g.devices))],
		index:     idx,
	}
	if len(g.recent) < recentEvents {
		g.recent = append(g.recent, ev)
	} else {
		g.recent[g.next] = ev
		g.next = (g.next + 1) % recentEvents
	}
	return ev
}

// denseKeysMax bounds the key spaces whose last seqs are kept in a slice
// (8 bytes a key: 128 MiB at the bound); a larger one uses a map of the
// keys generated. The slice spares the tool a map lookup per event (its
// CPU is taken from the stack it measures).
const denseKeysMax = 1 << 24

// lastSeqs is the greatest seq generated per key index.
type lastSeqs struct {
	dense  []int64
	sparse map[int64]int64
}

func newLastSeqs(keys int64) lastSeqs {
	if keys <= denseKeysMax {
		return lastSeqs{dense: make([]int64, keys)}
	}
	return lastSeqs{sparse: map[int64]int64{}}
}

func (l *lastSeqs) get(i int64) int64 {
	if l.dense != nil {
		return l.dense[i]
	}
	return l.sparse[i]
}

func (l *lastSeqs) set(i, seq int64) {
	if l.dense != nil {
		l.dense[i] = seq
		return
	}
	l.sparse[i] = seq
}
