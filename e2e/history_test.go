package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// history is every call the fault workload made and what it was answered:
// each acknowledged write with where the gateway said it is durable, and
// each read through the API with when it started and ended. The checker
// (checkHistory) holds the stores and the topic to it once the system is
// quiet.
type history struct {
	mu     sync.Mutex
	writes []ackedWrite
	reads  []apiRead
	// unreads counts the mark-unread calls made per key, acknowledged or
	// not (a call that failed may still have moved the epoch).
	unreads map[receipt.Key]int
	// durability counts the acknowledged writes by durability.
	durability map[string]int
}

func newHistory() *history {
	return &history{unreads: map[receipt.Key]int{}, durability: map[string]int{}}
}

// ackedWrite is one acknowledged write and how to find it on the topic: a
// record under recordKey that match accepts.
type ackedWrite struct {
	what       string
	recordKey  string
	durability string
	match      func(d event.Decoded) bool
}

// apiRead is one key's state as a read through the API answered it.
type apiRead struct {
	key        receipt.Key
	start, end time.Time
	state      receipt.State
	via        string
}

func (h *history) ack(w ackedWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
	h.durability[w.durability]++
}

func (h *history) read(r apiRead) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads = append(h.reads, r)
}

func (h *history) unread(k receipt.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unreads[k]++
}

// markWrite is the expectation of an acknowledged mark: a user event of
// its key, from its device, carrying its cursor at its seq (and at its
// epoch when the client sent one; the gateway resolves the others).
func markWrite(k receipt.Key, kind string, seq int64, epoch *int64, device, durability string) ackedWrite {
	return ackedWrite{what: "mark " + kind, recordKey: k.KafkaKey(), durability: durability, match: func(d event.Decoded) bool {
		if d.Receipt == nil || d.Receipt.DeviceID != device {
			return false
		}
		var c receipt.Cursor
		switch kind {
		case "read":
			c = d.Receipt.Read
		case "private":
			c = d.Receipt.PrivateRead
		default:
			c = d.Receipt.Delivered
			if !d.Receipt.Read.Position.IsZero() {
				return false
			}
		}
		return c.Position.Seq == seq && (epoch == nil || c.Position.Epoch == *epoch)
	}}
}

// unreadWrite is the expectation of an acknowledged mark-unread from seq:
// the private read at seq-1 at an epoch above 0, and no public cursor.
func unreadWrite(k receipt.Key, seq int64, device, durability string) ackedWrite {
	return ackedWrite{what: "mark-unread", recordKey: k.KafkaKey(), durability: durability, match: func(d event.Decoded) bool {
		return d.Receipt != nil && d.Receipt.DeviceID == device && d.Receipt.PrivateRead.Position.Seq == seq-1 &&
			d.Receipt.PrivateRead.Position.Epoch > 0 && d.Receipt.Read.Position.IsZero() && d.Receipt.Delivered.Position.IsZero()
	}}
}

// membershipWrite is the expectation of an acknowledged join or leave:
// its register, exactly.
func membershipWrite(m channel.Membership, durability string) ackedWrite {
	what := "leave"
	if m.Member {
		what = "join"
	}
	return ackedWrite{what: what, recordKey: m.Key.KafkaKey(), durability: durability, match: func(d event.Decoded) bool {
		return d.Membership != nil && d.Membership.Compare(m) == 0
	}}
}

// settingsWrite is the expectation of acknowledged settings: the register
// at the version the answer gave.
func settingsWrite(user string, versionMs int64, shareRead, shareDelivered bool) ackedWrite {
	return ackedWrite{what: "settings", recordKey: event.UserKey(user), durability: "KAFKA", match: func(d event.Decoded) bool {
		return d.Settings != nil && d.Settings.VersionMs == versionMs &&
			d.Settings.ShareRead == shareRead && d.Settings.ShareDelivered == shareDelivered
	}}
}

// erasureWrite is the expectation of an acknowledged erasure: the
// tombstone of the generation the answer gave.
func erasureWrite(user string, gen int64, durability string) ackedWrite {
	return ackedWrite{what: "erasure", recordKey: event.UserKey(user), durability: durability, match: func(d event.Decoded) bool {
		return d.Erasure != nil && d.Erasure.Generation == gen
	}}
}

// noticeWrites are the expectations of an acknowledged notice: a head of
// the channel at or past seq (a call's notices share one head record per
// channel), the sender's read at or past seq, and seq among the mentioned
// users' mentions.
func noticeWrites(ch string, seq int64, sender string, mentioned []string, durability string) []ackedWrite {
	out := []ackedWrite{
		{what: "notice head", recordKey: ch, durability: durability, match: func(d event.Decoded) bool {
			return d.Channel != nil && d.Channel.Seq >= seq
		}},
		{what: "notice sender read", recordKey: receipt.Key{User: sender, Channel: ch}.KafkaKey(), durability: durability, match: func(d event.Decoded) bool {
			return d.Receipt != nil && d.Receipt.Read.Position.Seq >= seq
		}},
	}
	for _, u := range mentioned {
		out = append(out, ackedWrite{what: "mention", recordKey: receipt.Key{User: u, Channel: ch}.KafkaKey(), durability: durability,
			match: func(d event.Decoded) bool { return slices.Contains(d.Mentions, seq) }})
	}
	return out
}

// historyVerdict is what checkHistory found.
type historyVerdict struct {
	writes, reads, records int
	// missing: acknowledged writes with no record on the topic.
	missing int
	// lost: keys (of any kind) where Postgres holds less than the merge of
	// every acknowledged write's record (erasures applied by their rule).
	lost int
	// regressed: reads through the API that answered a key lower than an
	// earlier read of the same segment had (positions ordered by (epoch,
	// seq): an acknowledged mark-unread moves forward in that order), or
	// at an epoch no mark-unread of the key can explain.
	regressed int
	problems  []string
}

func (v *historyVerdict) problem(format string, args ...any) {
	if len(v.problems) < 8 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

// readTopic consumes the whole topic from the start of every partition
// with a client of its own and returns its records decoded, by record key
// (records that do not decode, the poison scenario's, are counted apart).
func (s *stack) readTopic(ctx context.Context) (map[string][]event.Decoded, int, error) {
	adm := kadm.NewClient(s.kcl)
	starts, err := adm.ListStartOffsets(ctx, s.topic)
	if err != nil {
		return nil, 0, err
	}
	ends, err := adm.ListEndOffsets(ctx, s.topic)
	if err != nil {
		return nil, 0, err
	}
	// The partitions that hold records (deleted records move the start).
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if st, ok := starts.Lookup(s.topic, o.Partition); o.Offset > 0 && (!ok || st.Offset < o.Offset) {
			want[o.Partition] = o.Offset
		}
	})
	out := map[string][]event.Decoded{}
	if len(want) == 0 {
		return out, 0, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokerAddr), kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	undecodable := 0
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("reading the topic: %d partitions not read to their end: %w", len(want), err)
		}
		fs.EachError(func(_ string, p int32, ferr error) { err = fmt.Errorf("fetching partition %d: %w", p, ferr) })
		if err != nil {
			return nil, 0, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
			d, derr := event.DecodeRecord(r)
			if derr != nil {
				undecodable++
				return
			}
			out[string(r.Key)] = append(out[string(r.Key)], d)
		})
	}
	return out, undecodable, nil
}

// checkHistory holds the topic, Postgres and the reads to the history:
//   - every acknowledged write has its record on the topic (written there
//     at once, or spooled and replayed);
//   - for every key of every kind, Postgres holds at least the merge (by the
//     kind's own rule, pkg/kinds over the domain floor) of the records of
//     the acknowledged writes, without those an acknowledged erasure drops
//     (tombstone.Set.Drops), and at least every acknowledged tombstone;
//   - no read through the API went backwards.
func (s *stack) checkHistory(ctx context.Context, h *history) (historyVerdict, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := historyVerdict{writes: len(h.writes), reads: len(h.reads)}
	topic, _, err := s.readTopic(ctx)
	if err != nil {
		return v, err
	}
	for _, ds := range topic {
		v.records += len(ds)
	}

	// Every acknowledged write on the topic; the records that prove it are
	// what the model holds Postgres to.
	var matched []event.Decoded
	// Every erasure on the topic applies, acknowledged or not (a call
	// whose answer was lost may still have erased): the records it drops
	// are not owed to Postgres.
	tombs := tombstone.Set{}
	for _, ds := range topic {
		for _, d := range ds {
			if d.Erasure != nil {
				tombs.Add(*d.Erasure)
			}
		}
	}
	acked := tombstone.Set{}
	for _, w := range h.writes {
		i := slices.IndexFunc(topic[w.recordKey], w.match)
		if i < 0 {
			v.missing++
			v.problem("acknowledged %s (%s) of %s: no record on the topic", w.what, w.durability, w.recordKey)
			continue
		}
		d := topic[w.recordKey][i]
		if d.Erasure != nil {
			acked.Add(*d.Erasure)
			continue
		}
		matched = append(matched, d)
	}

	env := &kind.Env{Postgres: s.store, Redis: s.rstore, MentionCap: channel.MentionCapDefault}
	for _, k := range kinds.All() {
		model := map[any]any{}
		for _, d := range matched {
			if u := d.User(); u != "" && tombs.Drops(u, d.Generation, d.Stamped, d.AcceptedAt()) {
				continue
			}
			val, ok := k.FromEvent(&d)
			if !ok {
				continue
			}
			key := k.KeyOf(val)
			cur, ok := model[key]
			if !ok {
				cur = k.ZeroOf(key)
			}
			model[key] = k.MergeValues(env, cur, val)
		}
		keys := make([]any, 0, len(model))
		for key := range model {
			keys = append(keys, key)
		}
		got := map[any]any{}
		for chunk := range slices.Chunk(keys, 200) {
			vals, err := k.GetPG(ctx, env, chunk)
			if err != nil {
				return v, fmt.Errorf("%s: %w", k.Name(), err)
			}
			for _, val := range vals {
				got[k.KeyOf(val)] = val
			}
		}
		for key, want := range model {
			pg, ok := got[key]
			if !ok {
				pg = k.ZeroOf(key)
			}
			if !k.SameValues(k.MergeValues(env, pg, want), pg) {
				v.lost++
				v.problem("%s %v: postgres %+v is behind the acknowledged %+v", k.Name(), key, pg, want)
			}
		}
	}
	if len(acked) > 0 {
		users := make([]string, 0, len(acked))
		for u := range acked {
			users = append(users, u)
		}
		pg, err := s.store.Tombstones(ctx, users)
		if err != nil {
			return v, err
		}
		for u, want := range acked {
			if pg[u].Generation < want.Generation {
				v.lost++
				v.problem("erasure of %s: postgres holds generation %d, acknowledged %d", u, pg[u].Generation, want.Generation)
			}
		}
	}

	v.regressed = checkReads(h, &v)
	return v, nil
}

// checkReads counts the reads that answered a key lower than a read of the
// same key that had ended before they started, whatever happened between
// (a Redis loss included: the gateway restores before it answers); and
// the reads at an epoch above the number of mark-unread calls made on the
// key.
func checkReads(h *history, v *historyVerdict) int {
	byKey := map[receipt.Key][]apiRead{}
	for _, r := range h.reads {
		byKey[r.key] = append(byKey[r.key], r)
	}
	bad := 0
	for k, rs := range byKey {
		slices.SortFunc(rs, func(a, b apiRead) int { return a.start.Compare(b.start) })
		for j, r := range rs {
			if e := r.state.ReadEpoch(); e > int64(h.unreads[k]) {
				bad++
				v.problem("read of %s via %s at epoch %d, after %d mark-unread calls", k.KafkaKey(), r.via, e, h.unreads[k])
			}
			for _, p := range rs[:j] {
				if !p.end.Before(r.start) {
					continue
				}
				if below(r.state, p.state) {
					bad++
					v.problem("read of %s via %s at %s answered read %+v delivered %+v own %+v, below an earlier read via %s: %+v %+v %+v",
						k.KafkaKey(), r.via, r.start.Format("15:04:05.000"), r.state.Read.Position, r.state.Delivered.Position, r.state.EffectiveRead(),
						p.via, p.state.Read.Position, p.state.Delivered.Position, p.state.EffectiveRead())
					break
				}
			}
		}
	}
	return bad
}

// below reports whether any cursor of a is behind the same cursor of b
// (the public read by seq, the own position by epoch).
func below(a, b receipt.State) bool {
	return a.Read.Position.CompareBySeq(b.Read.Position) < 0 || a.Delivered.Position.Compare(b.Delivered.Position) < 0 ||
		a.EffectiveRead().Compare(b.EffectiveRead()) < 0
}
