package batch

// Failure is one item the store rejected.
type Failure struct {
	// Index is the item's position in the slice given to Bisect.
	Index int
	// Err is the rejection the store returned for the item alone.
	Err error
}

// Result is the outcome of Bisect: a partial failure is a value, not an
// error. When Failed is empty every item was written.
type Result[T any] struct {
	// Written holds the items that were written, in input order.
	Written []T
	// Failed lists the rejected items by ascending index.
	Failed []Failure
	// Writes counts the calls made to write (1 when nothing was rejected).
	Writes int
}

// Bisect writes items with write and isolates the ones the store rejects.
// It first writes the whole slice; when write returns an error for which
// isRejected is true, it splits the slice in halves and writes each half,
// recursively, until every rejected item stands alone. A lone item that is
// still rejected is recorded in Failed with its error; everything else ends
// up in Written. Each call to write must be atomic (all or nothing), as one
// database transaction is.
//
// An error that is not a rejection (an outage, a cancelled context) aborts
// at once: Bisect returns it unchanged, with the Result so far, and the
// caller must treat the batch as not written (halves already written are
// harmless to write again when writes are idempotent).
//
// With r rejected items among n, Bisect calls write at most about
// 2·r·log2(n) + 1 times.
func Bisect[T any](items []T, write func([]T) error, isRejected func(error) bool) (Result[T], error) {
	var res Result[T]
	if len(items) == 0 {
		return res, nil
	}
	// The walk is depth-first, left half first, so Written and Failed come
	// out in input order without sorting.
	var walk func(lo, hi int) error
	walk = func(lo, hi int) error {
		res.Writes++
		err := write(items[lo:hi:hi])
		if err == nil {
			res.Written = append(res.Written, items[lo:hi]...)
			return nil
		}
		if !isRejected(err) {
			return err
		}
		if hi-lo == 1 {
			res.Failed = append(res.Failed, Failure{Index: lo, Err: err})
			return nil
		}
		mid := lo + (hi-lo)/2
		if err := walk(lo, mid); err != nil {
			return err
		}
		return walk(mid, hi)
	}
	err := walk(0, len(items))
	return res, err
}
