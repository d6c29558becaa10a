package persister

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
)

// parts is a set of kinds, by their index in the persister's list: the
// parts of a window a record contributes to (a join, for instance, to
// the membership and the cursors).
type parts uint64

// maxKinds bounds the kinds one persister writes (a bit each in parts).
const maxKinds = 64

// window is the unit of one write: the records of many polls, decoded and
// folded into one part per kind of state as they arrive (each key keeps
// the merge of its values), so that a key changed many times in the
// window costs one row per kind. Its offsets are committed only after
// every part is written.
type window struct {
	kinds []kind.Kind
	parts []kind.Part
	// recs are the window's records in poll order; keys[i] is the record
	// key of recs[i] ("" for an undecodable one) and of[i] the parts it
	// contributes to.
	recs []*kgo.Record
	keys []string
	of   []parts
	// erasures are the window's erasure tombstones, applied before its rows.
	erasures tombstone.Set
	// stamps holds, per user, the greatest erasure generation the window's
	// events were stamped with (the time: the earliest of those events'):
	// an erasure the gateway ordered them after, whose own record may
	// still be on its way (another partition).
	stamps tombstone.Set

	undecodable []deadLetter
	// last holds, per partition, the window's last record: what is
	// committed once the window is written.
	last map[topicPartition]*kgo.Record
}

func newWindow(capacity int, ks []kind.Kind, env *kind.Env) *window {
	w := &window{
		kinds:    ks,
		parts:    make([]kind.Part, len(ks)),
		recs:     make([]*kgo.Record, 0, capacity),
		keys:     make([]string, 0, capacity),
		of:       make([]parts, 0, capacity),
		erasures: tombstone.Set{},
		stamps:   tombstone.Set{},
		last:     map[topicPartition]*kgo.Record{},
	}
	for i, k := range ks {
		hint := 0
		if k == kinds.Cursors {
			hint = capacity / 4 // most records carry cursors
		}
		w.parts[i] = k.NewPart(env, hint)
	}
	return w
}

// add decodes recs into the window. An undecodable record is kept for the
// dead-letter topic with the reason; its offset is committed with the rest
// once it is acked there.
func (w *window) add(recs []*kgo.Record) {
	for _, r := range recs {
		tp := topicPartition{r.Topic, r.Partition}
		if cur := w.last[tp]; cur == nil || cur.Offset < r.Offset {
			w.last[tp] = r
		}
		d, err := kind.DecodeRecord(w.kinds, r)
		w.recs = append(w.recs, r)
		if err != nil {
			w.keys = append(w.keys, "")
			w.of = append(w.of, 0)
			w.undecodable = append(w.undecodable, deadLetter{src: r, reason: err.Error()})
			continue
		}
		w.keys = append(w.keys, d.RecordKey())
		if d.Erasure != nil {
			w.erasures.Add(*d.Erasure)
		}
		if u := d.User(); u != "" && d.Generation > 0 {
			w.stamp(u, d.Generation, d.AcceptedAt())
		}
		w.of = append(w.of, w.fold(&d))
	}
}

// stamp records that an event of user was stamped with generation gen
// and accepted at acceptedAtMs.
func (w *window) stamp(user string, gen, acceptedAtMs int64) {
	cur, ok := w.stamps[user]
	switch {
	case !ok || gen > cur.Generation:
		w.stamps[user] = tombstone.Tombstone{User: user, Generation: gen, ErasedAtUnixMs: max(acceptedAtMs, 0)}
	case gen == cur.Generation && acceptedAtMs < cur.ErasedAtUnixMs:
		cur.ErasedAtUnixMs = max(acceptedAtMs, 0)
		w.stamps[user] = cur
	}
}

// fold merges one decoded event into the window's parts and returns the
// parts it contributes to.
func (w *window) fold(d *event.Decoded) parts {
	var of parts
	for i, p := range w.parts {
		if p.Fold(d) {
			of |= 1 << i
		}
	}
	return of
}

// users returns the distinct users of the window's values.
func (w *window) users() []string {
	seen := map[string]struct{}{}
	for _, p := range w.parts {
		p.AddUsers(seen)
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// dropErased takes out of the window every event of an erased user that
// predates the erasure (tombstone.Drops): the values of the users in
// tombs are rebuilt from the window's records that survive. Erased users
// are rare, so only their records are decoded again. It returns how many
// events were dropped; those contribute to no part (never dead-lettered).
func (w *window) dropErased(tombs tombstone.Set) int {
	if len(tombs) == 0 {
		return 0
	}
	erased := func(u string) bool { _, ok := tombs[u]; return ok }
	for _, p := range w.parts {
		p.Drop(erased)
	}
	dropped := 0
	for i, key := range w.keys {
		user, isUser := recordUser(key)
		if !isUser || w.of[i] == 0 || !erased(user) {
			continue
		}
		d, err := kind.DecodeRecord(w.kinds, w.recs[i])
		if err != nil {
			continue // decoded once already; cannot happen
		}
		if tombs.Drops(user, d.Generation, d.Stamped, d.AcceptedAt()) {
			w.of[i] = 0
			dropped++
			continue
		}
		w.fold(&d)
	}
	return dropped
}

// ofUsers returns the values of users in the window, for writing again: a
// window of its own, with no records or offsets.
func (w *window) ofUsers(users tombstone.Set) *window {
	keep := func(u string) bool { _, ok := users[u]; return ok }
	sub := &window{kinds: w.kinds, parts: make([]kind.Part, len(w.parts)), erasures: tombstone.Set{}, stamps: tombstone.Set{}, last: map[topicPartition]*kgo.Record{}}
	for i, p := range w.parts {
		sub.parts[i] = p.Only(keep)
	}
	return sub
}

// recordUser is the user of a record key as Decoded.RecordKey writes it
// (ids escaped): "user:channel" or a user-wide event's "u::user"; a
// channel event's key has none.
func recordUser(key string) (string, bool) {
	if u, ok := strings.CutPrefix(key, event.UserKey("")); ok {
		return receipt.UnescapeKeyID(u)
	}
	k, ok := receipt.ParseKafkaKey(key)
	return k.User, ok
}

// len is the number of records in the window.
func (w *window) len() int { return len(w.recs) }

// rowCount is the number of Postgres rows of every part.
func (w *window) rowCount() int {
	n := 0
	for _, p := range w.parts {
		n += p.Rows()
	}
	return n
}

// sort orders every part ahead, off the writer: the poller calls it on a
// window it is about to wait to hand over, while the writer still writes
// the previous one (a 50,000-record window's sort is ~10 % of its write).
func (w *window) sort() {
	for _, p := range w.parts {
		p.Sort()
	}
}

// cursorRows returns the window's cursor rows in key order (none when the
// persister writes no cursors).
func (w *window) cursorRows() []receipt.State {
	for i, k := range w.kinds {
		if k == kinds.Cursors {
			return kind.Sorted[receipt.State](w.parts[i])
		}
	}
	return nil
}

// rejection is a row a kind's table refused, by record key.
type rejection struct {
	kind int
	key  string
}

// sourcesOf returns the records behind the rejected rows, in window
// order: every record of a rejected row's key that contributed to that
// kind goes to the dead-letter topic (a record is sent once, even when
// several of its kinds refused it).
func (w *window) sourcesOf(rejected map[rejection]error) []deadLetter {
	var out []deadLetter
	for i, k := range w.keys {
		if k == "" {
			continue
		}
		for j := range w.kinds {
			if w.of[i]&(1<<j) == 0 {
				continue
			}
			if err, ok := rejected[rejection{j, k}]; ok {
				out = append(out, deadLetter{src: w.recs[i], reason: w.kinds[j].Name() + ": " + err.Error()})
				break
			}
		}
	}
	return out
}

// offsets are the records to commit for the window: each partition's last.
func (w *window) offsets() []*kgo.Record {
	out := make([]*kgo.Record, 0, len(w.last))
	for _, r := range w.last {
		out = append(out, r)
	}
	return out
}
