package persister

import (
	"sync"

	"github.com/readstate/receipts/pkg/receipt"
)

// written remembers, for recently written keys, the cursors Postgres is
// known to hold at least: a row whose incoming cursors are not ahead of
// them cannot change Postgres, so it is not sent at all (a stale or
// duplicate event costs no write; even a max-merge upsert that changes
// nothing locks its row, which dirties the page and writes WAL).
//
// It is safe because a stored cursor only moves forward: Postgres holds at
// least what was written (the repair paths and other replicas only raise
// it further), so "incoming ≤ remembered" implies "incoming ≤ stored".
// Only rows whose write committed are remembered. It is bounded: past
// capacity, an arbitrary tenth of it is forgotten (a forgotten key only
// costs a write that may turn out to be a no-op).
type written struct {
	mu       sync.Mutex
	capacity int
	m        map[receipt.Key]writtenCursors
}

// writtenCursors holds the greatest positions written per cursor, each in its
// cursor's order (receipt.Merge): the public read by (seq, epoch), the own
// read by (epoch, seq) over every read and private read written (Postgres
// keeps that in its private read column), delivered by (epoch, seq). So
// "incoming ≤ remembered" implies "incoming changes nothing".
type writtenCursors struct{ read, own, delivered receipt.Position }

func newWritten(capacity int) *written {
	return &written{capacity: capacity, m: make(map[receipt.Key]writtenCursors, min(capacity, 1<<16))}
}

// filter returns the rows that may advance Postgres, keeping their order.
func (w *written) filter(rows []receipt.State) []receipt.State {
	if w.capacity <= 0 {
		return rows
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := rows[:0:0]
	for _, r := range rows {
		c, ok := w.m[r.Key]
		if ok && r.Read.Position.CompareBySeq(c.read) <= 0 && r.Delivered.Position.Compare(c.delivered) <= 0 &&
			r.Read.Position.Compare(c.own) <= 0 && r.PrivateRead.Position.Compare(c.own) <= 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

// remember records rows whose write committed.
func (w *written) remember(rows []receipt.State) {
	if w.capacity <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		c := w.m[r.Key]
		if r.Read.Position.CompareBySeq(c.read) > 0 {
			c.read = r.Read.Position
		}
		for _, p := range []receipt.Position{r.Read.Position, r.PrivateRead.Position} {
			if p.Compare(c.own) > 0 {
				c.own = p
			}
		}
		if r.Delivered.Position.Compare(c.delivered) > 0 {
			c.delivered = r.Delivered.Position
		}
		w.m[r.Key] = c
	}
	if len(w.m) > w.capacity {
		drop := len(w.m) - w.capacity + w.capacity/10
		for k := range w.m {
			if drop == 0 {
				break
			}
			delete(w.m, k)
			drop--
		}
	}
}

// enabled says whether the cache remembers anything (has answers).
func (w *written) enabled() bool { return w.capacity > 0 }

// has says whether a write of k committed and was not forgotten since: k
// has a row in Postgres unless another replica's erasure took it.
func (w *written) has(k receipt.Key) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.m[k]
	return ok
}

// forget drops the keys of the rows given: after an erasure, what was
// written for a key says nothing of what Postgres holds.
func (w *written) forget(keys []receipt.Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		delete(w.m, k)
	}
}

// len is the number of keys remembered.
func (w *written) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
