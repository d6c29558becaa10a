package batch

// Dedupe returns one item per key, in the order each key first appears.
// Later items with a key already seen are folded into the kept one with
// merge(kept, next). For a max-register merge is the max, so the result is
// the same whatever the order or the number of duplicates.
func Dedupe[T any, K comparable](items []T, key func(T) K, merge func(kept, next T) T) []T {
	if len(items) == 0 {
		return nil
	}
	at := make(map[K]int, len(items))
	out := make([]T, 0, len(items))
	for _, it := range items {
		k := key(it)
		if i, ok := at[k]; ok {
			out[i] = merge(out[i], it)
			continue
		}
		at[k] = len(out)
		out = append(out, it)
	}
	return out
}

// Greatest returns a merge function for Dedupe that keeps the greater item
// by cmp; on a tie it keeps the item already kept, so equal duplicates
// change nothing.
func Greatest[T any](cmp func(a, b T) int) func(kept, next T) T {
	return func(kept, next T) T {
		if cmp(next, kept) > 0 {
			return next
		}
		return kept
	}
}
