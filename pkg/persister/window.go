package persister

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
)

// window is the unit of one write: the records of many polls, decoded and
// deduplicated to the greatest value per key as they arrive, so that a key
// marked many times in the window costs one row. Its offsets are committed
// only after all of its rows are written.
type window struct {
	// recs are the window's records in poll order; keys[i] is the key of
	// recs[i] (the zero key for an undecodable one).
	recs []*kgo.Record
	keys []receipt.Key
	// rows holds the greatest state per key; order lists the keys in the
	// order they first appeared.
	rows        map[receipt.Key]receipt.State
	undecodable []deadLetter
	// last holds, per partition, the window's last record: what is
	// committed once the window is written.
	last map[topicPartition]*kgo.Record
}

func newWindow(capacity int) *window {
	return &window{
		recs: make([]*kgo.Record, 0, capacity),
		keys: make([]receipt.Key, 0, capacity),
		rows: make(map[receipt.Key]receipt.State, capacity/4),
		last: map[topicPartition]*kgo.Record{},
	}
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
		s, err := event.Decode(r)
		if err != nil {
			w.recs = append(w.recs, r)
			w.keys = append(w.keys, receipt.Key{})
			w.undecodable = append(w.undecodable, deadLetter{src: r, reason: err.Error()})
			continue
		}
		w.recs = append(w.recs, r)
		w.keys = append(w.keys, s.Key)
		// Merging into the stored (or the zero) state applies the rules of
		// the merge to a lone record too (reading implies delivery), so
		// what Postgres ends with does not depend on how records fell into
		// windows.
		kept := w.rows[s.Key]
		merged, _ := receipt.Merge(kept, s)
		w.rows[s.Key] = merged
	}
}

// len is the number of records in the window.
func (w *window) len() int { return len(w.recs) }

// sourcesOf returns the records of the given keys, in window order: all
// of a rejected row's records go to the dead-letter topic.
func (w *window) sourcesOf(keys map[receipt.Key]error) []deadLetter {
	var out []deadLetter
	for i, k := range w.keys {
		if err, ok := keys[k]; ok && k != (receipt.Key{}) {
			out = append(out, deadLetter{src: w.recs[i], reason: err.Error()})
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
