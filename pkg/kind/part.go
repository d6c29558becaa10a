package kind

import (
	"context"
	"slices"

	"github.com/readstate/receipts/pkg/event"
)

// Part is one kind's share of a persister window: one value per key,
// merged by the kind's rule as records arrive, so a key changed many
// times in the window costs one row. It is typed inside (no boxing on
// the hot path).
type Part interface {
	// Fold merges the kind's part of d, if it carries one, and reports
	// whether it did.
	Fold(d *event.Decoded) bool
	// Keys is the number of keys, Rows the Postgres rows they cost.
	Keys() int
	Rows() int
	// AddUsers adds the users of the part's keys to users.
	AddUsers(users map[string]struct{})
	// Drop removes the values of the users drop names.
	Drop(drop func(user string) bool)
	// Only is a new part with the values of the users keep names.
	Only(keep func(user string) bool) Part
	// Sort orders the values by key ahead of Statements (the poller sorts
	// a window while it waits to hand it over); a Fold or Drop undoes it.
	Sort()
	// Statements splits the sorted values into statements of at most n;
	// Trims does the same for the kind's retention (none: nil).
	Statements(n int) []Statement
	Trims(n int) []func(context.Context) (int64, error)
}

// Statement is one statement's values, in key order.
type Statement interface {
	Len() int
	// RecordKey is the record key of the i-th value: a rejected row's
	// records go to the dead-letter topic.
	RecordKey(i int) string
	// Write merges values [i, j) into Postgres.
	Write(ctx context.Context, i, j int) (int64, error)
}

type part[K comparable, V any] struct {
	s      *Spec[K, V]
	env    *Env
	vals   map[K]V
	sorted []V // nil until Sort, and after a change
	// gathered are the keys whose values Spec.Gather grew since the last
	// settle: the part owns those values' memory.
	gathered map[K]struct{}
}

func (k kind[K, V]) NewPart(env *Env, sizeHint int) Part {
	return &part[K, V]{s: k.s, env: env, vals: make(map[K]V, sizeHint)}
}

func (p *part[K, V]) Fold(d *event.Decoded) bool {
	v, ok := p.s.fromEvent(d)
	if !ok {
		return false
	}
	p.put(v)
	return true
}

func (p *part[K, V]) put(v V) {
	p.sorted = nil
	k := p.s.Key(v)
	cur, ok := p.vals[k]
	if p.s.Gather != nil {
		if _, owned := p.gathered[k]; !owned {
			// A settled value may be shared (Only): gather onto a copy.
			acc := p.s.Zero(k)
			if ok {
				acc = p.s.Gather(acc, cur)
			}
			cur = acc
			if p.gathered == nil {
				p.gathered = map[K]struct{}{}
			}
			p.gathered[k] = struct{}{}
		}
		p.vals[k] = p.s.Gather(cur, v)
		return
	}
	if !ok {
		// Merging into the zero value applies the rule to a lone value
		// too (reading implies delivery), so what Postgres ends with does
		// not depend on how records fell into windows.
		cur = p.s.Zero(k)
	}
	p.vals[k] = p.s.Merge(p.env, cur, v)
}

// settle brings the gathered values to their merged form; every read of
// the part calls it first.
func (p *part[K, V]) settle() {
	for k := range p.gathered {
		p.vals[k] = p.s.Settle(p.env, p.vals[k])
	}
	clear(p.gathered)
}

func (p *part[K, V]) Keys() int { p.settle(); return len(p.vals) }

func (p *part[K, V]) Rows() int {
	p.settle()
	if p.s.Rows == nil {
		return len(p.vals)
	}
	n := 0
	for _, v := range p.vals {
		n += p.s.Rows(v)
	}
	return n
}

func (p *part[K, V]) AddUsers(users map[string]struct{}) {
	p.settle()
	if p.s.User == nil {
		return
	}
	for k := range p.vals {
		users[p.s.User(k)] = struct{}{}
	}
}

func (p *part[K, V]) Drop(drop func(string) bool) {
	p.settle()
	if p.s.User == nil {
		return
	}
	for k := range p.vals {
		if drop(p.s.User(k)) {
			delete(p.vals, k)
			p.sorted = nil
		}
	}
}

func (p *part[K, V]) Only(keep func(string) bool) Part {
	p.settle()
	out := &part[K, V]{s: p.s, env: p.env, vals: map[K]V{}}
	if p.s.User == nil {
		return out
	}
	for k, v := range p.vals {
		if keep(p.s.User(k)) {
			out.vals[k] = v
		}
	}
	return out
}

func (p *part[K, V]) Sort() {
	p.settle()
	if p.sorted != nil {
		return
	}
	out := make([]V, 0, len(p.vals))
	for _, v := range p.vals {
		out = append(out, v)
	}
	slices.SortFunc(out, p.s.Compare)
	p.sorted = out
}

// values returns the sorted values (Sorted's typed access).
func (p *part[K, V]) values() []V {
	p.Sort()
	return p.sorted
}

func (p *part[K, V]) Statements(n int) []Statement {
	vals := p.values()
	out := make([]Statement, 0, (len(vals)+n-1)/n)
	for start := 0; start < len(vals); start += n {
		end := min(start+n, len(vals))
		out = append(out, statement[K, V]{p: p, vals: vals[start:end:end]})
	}
	return out
}

func (p *part[K, V]) Trims(n int) []func(context.Context) (int64, error) {
	if p.s.PGTrim == nil {
		return nil
	}
	var out []func(context.Context) (int64, error)
	for _, st := range p.Statements(n) {
		vals := st.(statement[K, V]).vals
		out = append(out, func(ctx context.Context) (int64, error) { return p.s.PGTrim(ctx, p.env, vals) })
	}
	return out
}

type statement[K comparable, V any] struct {
	p    *part[K, V]
	vals []V
}

func (s statement[K, V]) Len() int { return len(s.vals) }

func (s statement[K, V]) RecordKey(i int) string { return s.p.s.RecordKey(s.p.s.Key(s.vals[i])) }

func (s statement[K, V]) Write(ctx context.Context, i, j int) (int64, error) {
	return s.p.s.PGWrite(ctx, s.p.env, s.vals[i:j])
}

// Sorted returns a part's values in key order, typed: for a caller that
// writes one kind its own way (the persister's cursor fast path).
func Sorted[V any](p Part) []V {
	return p.(interface{ values() []V }).values()
}
