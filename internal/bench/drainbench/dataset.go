package drainbench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

// Data set defaults: the persister benchmark's set (BENCHMARKS.md).
const (
	SeedDefault     = 1
	EventsDefault   = 1_000_000
	UsersDefault    = 100_000
	ChannelsDefault = 20
	ZipfDefault     = 1.1
	// DupDefault and LateDefault match `make bench-stack`'s workload
	// (20 % duplicate resends, 10 % out of order).
	DupDefault  = 0.2
	LateDefault = 0.1
	// DevicesDefault is how many devices a user marks from.
	DevicesDefault = 3
	// LateWindow bounds how far behind a late arrival is: 1 to LateWindow
	// seqs below the key's latest.
	LateWindow = 8
	// EventsPerMs spaces the accepted-at timestamps: 1 ms every EventsPerMs
	// events (an arrival rate of 50k events/s).
	EventsPerMs = 50
	// StartUnixMs is the accepted-at time of the first event
	// (2026-01-01T00:00:00Z), fixed so the records are the same bytes in
	// every run.
	StartUnixMs = 1_767_225_600_000
)

// DataConfig describes a data set. Equal configs give equal data sets, byte
// for byte, on any machine and Go release: the only randomness is a PCG
// stream (whose algorithm is fixed) mapped by this file's own code.
type DataConfig struct {
	// Seed of the PCG stream.
	Seed uint64
	// Events is the number of records.
	Events int
	// Users and Channels size the key space; ids are "u<rank>" and
	// "c<rank>", rank 0 the most popular.
	Users, Channels int
	// Zipf is the skew s: rank k (from 0) of users, and independently of
	// channels, is drawn with probability proportional to (k+1)^-s.
	Zipf float64
	// Dup is the share of events that resend the key's latest mark (same
	// seq, message id and device; a new accepted-at time).
	Dup float64
	// Late is the share of events that arrive late: a seq 1 to LateWindow
	// below the key's latest, from any device.
	Late float64
	// Devices is how many device ids ("d<n>") marks come from.
	Devices int
}

// DefaultDataConfig is the default data set: 1M events, 100k users × 20
// channels, s = 1.1, 20 % resends and 10 % late arrivals, seed 1.
func DefaultDataConfig() DataConfig {
	return DataConfig{
		Seed: SeedDefault, Events: EventsDefault, Users: UsersDefault, Channels: ChannelsDefault,
		Zipf: ZipfDefault, Dup: DupDefault, Late: LateDefault, Devices: DevicesDefault,
	}
}

// Validate reports every bad field at once.
func (c DataConfig) Validate() error {
	var errs []error
	if c.Events < 1 {
		errs = append(errs, fmt.Errorf("events must be > 0, got %d", c.Events))
	}
	if c.Users < 1 || c.Channels < 1 {
		errs = append(errs, fmt.Errorf("users and channels must be > 0, got %d and %d", c.Users, c.Channels))
	}
	if c.Users > math.MaxInt32 || c.Channels > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("users and channels must fit in int32"))
	}
	if !(c.Zipf > 0) || math.IsInf(c.Zipf, 0) {
		errs = append(errs, fmt.Errorf("zipf s must be > 0, got %v", c.Zipf))
	}
	if c.Dup < 0 || c.Late < 0 || c.Dup+c.Late > 1 || math.IsNaN(c.Dup+c.Late) {
		errs = append(errs, fmt.Errorf("dup and late must be >= 0 with dup + late <= 1, got %v and %v", c.Dup, c.Late))
	}
	if c.Devices < 1 || c.Devices > math.MaxUint8 {
		errs = append(errs, fmt.Errorf("devices must be in [1, 255], got %d", c.Devices))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid data set: %w", errors.Join(errs...))
	}
	return nil
}

// Kind says how an event's seq relates to its key's history.
type Kind uint8

// Kinds.
const (
	// KindAdvance moves the key's seq forward by 1 to 3.
	KindAdvance Kind = iota
	// KindDup resends the key's latest mark.
	KindDup
	// KindLate carries a seq below the key's latest.
	KindLate
)

// Event is one generated READ mark, compact and pointer-free (the data
// set stays in memory, unscanned by the GC, while the drain is measured).
type Event struct {
	Seq    int64
	AtMs   int64
	User   int32
	Chan   int32
	Device uint8
	Kind   Kind
}

// Dataset is a generated data set: the events in produce order.
type Dataset struct {
	Config DataConfig
	Events []Event
}

// Generate builds the data set of cfg.
//
// The model, in stream order for event i: draw a user rank and a channel
// rank from the Zipf tables; then draw u in [0,1): with u < Dup and a key
// already seen, resend its latest mark; with u < Dup+Late and the key's
// latest seq above 1, a late seq = latest − 1 − n, n uniform in
// [0, min(latest−1, LateWindow)); otherwise advance: seq = latest + 1 + n,
// n uniform in [0, 3) (the first mark of a key is an advance from 0). A
// new mark's device is uniform over Devices. Every mark is READ at epoch
// 0 with message id "m<seq>", accepted at StartUnixMs + i/EventsPerMs.
func Generate(cfg DataConfig) (*Dataset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := newStream(cfg.Seed)
	users, chans := newZipfTable(cfg.Users, cfg.Zipf), newZipfTable(cfg.Channels, cfg.Zipf)
	type latest struct {
		seq    int64
		device uint8
	}
	last := make(map[uint64]latest, min(cfg.Events, 1<<22))
	evs := make([]Event, cfg.Events)
	for i := range evs {
		u, c := users.draw(r.float()), chans.draw(r.float())
		id := uint64(u)*uint64(cfg.Channels) + uint64(c)
		l := last[id]
		p := r.float()
		e := Event{User: int32(u), Chan: int32(c), AtMs: StartUnixMs + int64(i)/EventsPerMs}
		switch {
		case p < cfg.Dup && l.seq > 0:
			e.Kind, e.Seq, e.Device = KindDup, l.seq, l.device
		case p < cfg.Dup+cfg.Late && l.seq > 1:
			e.Kind = KindLate
			e.Seq = l.seq - 1 - int64(r.intn(int(min(l.seq-1, LateWindow))))
			e.Device = uint8(r.intn(cfg.Devices))
		default:
			e.Kind = KindAdvance
			e.Seq = l.seq + 1 + int64(r.intn(3))
			e.Device = uint8(r.intn(cfg.Devices))
			last[id] = latest{seq: e.Seq, device: e.Device}
		}
		evs[i] = e
	}
	return &Dataset{Config: cfg, Events: evs}, nil
}

// KeyID numbers a key: user rank × Channels + channel rank.
func (d *Dataset) KeyID(e Event) uint64 {
	return uint64(e.User)*uint64(d.Config.Channels) + uint64(e.Chan)
}

// Key is the event's key.
func (d *Dataset) Key(e Event) receipt.Key {
	return receipt.Key{User: "u" + strconv.Itoa(int(e.User)), Channel: "c" + strconv.Itoa(int(e.Chan))}
}

// State is what the gateway would produce for event i: a READ mark sets
// the read and the delivered cursors (reading implies delivery).
func (d *Dataset) State(i int) receipt.State {
	e := d.Events[i]
	c := receipt.Cursor{Position: receipt.Position{Seq: e.Seq}, MessageID: "m" + strconv.FormatInt(e.Seq, 10)}
	return receipt.State{
		Key:             d.Key(e),
		Read:            c,
		Delivered:       c,
		DeviceID:        "d" + strconv.Itoa(int(e.Device)),
		UpdatedAtUnixMs: e.AtMs,
	}
}

// Record is event i as the production codec encodes it (pkg/event: key
// "user:channel", protobuf value); the topic is left to the producer.
func (d *Dataset) Record(i int) (*kgo.Record, error) { return event.Encode(d.State(i)) }

// Final is a key's row once every event up to some point is applied: the
// max-register fold (receipt.Merge) of its events in stream order.
type Final struct {
	State receipt.State
	// KeyID is Dataset.KeyID of the key.
	KeyID uint64
	// LastAdvance is the index of the last event that changed the row: the
	// event Postgres must have seen for the row to be final.
	LastAdvance int
}

// Finals folds the first n events per key with receipt.Merge (the rule
// every store applies) and returns one row per key, by KeyID.
func (d *Dataset) Finals(n int) []Final {
	n = min(n, len(d.Events))
	idx := make(map[uint64]int, 1<<16)
	var out []Final
	for i := range n {
		id := d.KeyID(d.Events[i])
		j, ok := idx[id]
		if !ok {
			j = len(out)
			idx[id] = j
			out = append(out, Final{KeyID: id, LastAdvance: -1})
		}
		merged, advanced := receipt.Merge(out[j].State, d.State(i))
		if advanced {
			out[j].State, out[j].LastAdvance = merged, i
		}
	}
	slices.SortFunc(out, func(a, b Final) int {
		switch {
		case a.KeyID < b.KeyID:
			return -1
		case a.KeyID > b.KeyID:
			return 1
		}
		return 0
	})
	return out
}

// DatasetStats describes a data set.
type DatasetStats struct {
	Events       int `json:"events"`
	DistinctKeys int `json:"distinct_keys"`
	// Advancing counts the events that moved their key forward in stream
	// order: the rows a writer without any dedupe would write.
	Advancing int `json:"advancing_events"`
	Dups      int `json:"dup_events"`
	Late      int `json:"late_events"`
	// HottestKeyEvents is the count of events of the most frequent key.
	HottestKeyEvents int `json:"hottest_key_events"`
	// Top1PctKeysShare is the share of events on the 1 % most frequent keys.
	Top1PctKeysShare float64 `json:"top_1pct_keys_event_share"`
	// SumReadSeq is the sum of the final read seqs (a cheap checksum of
	// the final table).
	SumReadSeq int64 `json:"sum_final_read_seq"`
	// ValueBytes is the mean encoded record value size.
	MeanValueBytes float64 `json:"mean_value_bytes"`
}

// Stats computes the data set's description from its finals.
func (d *Dataset) Stats(finals []Final) DatasetStats {
	s := DatasetStats{Events: len(d.Events), DistinctKeys: len(finals)}
	perKey := make(map[uint64]int, len(finals))
	// Advancing events: Finals only keeps the last one per key, so recount
	// with the same rule (the greatest seq so far, per key).
	maxSeq := make(map[uint64]int64, len(finals))
	for _, e := range d.Events {
		id := d.KeyID(e)
		perKey[id]++
		if e.Seq > maxSeq[id] {
			maxSeq[id] = e.Seq
			s.Advancing++
		}
		switch e.Kind {
		case KindDup:
			s.Dups++
		case KindLate:
			s.Late++
		}
	}
	counts := make([]int, 0, len(perKey))
	for _, c := range perKey {
		counts = append(counts, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	if len(counts) > 0 {
		s.HottestKeyEvents = counts[0]
		top := max(1, len(counts)/100)
		var sum int
		for _, c := range counts[:top] {
			sum += c
		}
		s.Top1PctKeysShare = float64(sum) / float64(len(d.Events))
	}
	for _, f := range finals {
		s.SumReadSeq += f.State.Read.Position.Seq
	}
	// The mean value size from a sample: every 1000th event.
	var bytes, n int
	for i := 0; i < len(d.Events); i += 1000 {
		if r, err := d.Record(i); err == nil {
			bytes += len(r.Value)
			n++
		}
	}
	if n > 0 {
		s.MeanValueBytes = float64(bytes) / float64(n)
	}
	return s
}

// stream is the data set's randomness: PCG-DXSM outputs mapped by this
// file's own code, so that nothing depends on how a Go release implements
// math/rand/v2's helper methods.
type stream struct{ pcg *rand.PCG }

func newStream(seed uint64) *stream { return &stream{pcg: rand.NewPCG(seed, 0x6472_6169_6e62_656e)} }

// float is uniform in [0, 1) with 53 bits.
func (s *stream) float() float64 { return float64(s.pcg.Uint64()>>11) / (1 << 53) }

// intn is in [0, n) (modulo bias below 2^-40 for the n used here).
func (s *stream) intn(n int) int { return int(s.pcg.Uint64() % uint64(n)) }

// zipfTable draws ranks k in [0, n) with probability ∝ (k+1)^-s by
// inverting the cumulative distribution.
type zipfTable []float64

func newZipfTable(n int, s float64) zipfTable {
	t := make(zipfTable, n)
	var sum float64
	for k := range t {
		sum += math.Pow(float64(k+1), -s)
		t[k] = sum
	}
	for k := range t {
		t[k] /= sum
	}
	t[n-1] = 1
	return t
}

// draw maps u in [0, 1) to a rank.
func (t zipfTable) draw(u float64) int {
	// The smallest k with cdf[k] > u.
	return sort.Search(len(t), func(k int) bool { return t[k] > u })
}
