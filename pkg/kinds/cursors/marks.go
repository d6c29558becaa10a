package cursors

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// The gateway's marks are merged in two round trips instead of one script
// per mark: the stored values are read (one small script per cluster slot
// and 128 keys), merged in Go (the same rules as the merge script,
// receipt.Merge with the epochs resolved), and only the keys that change
// are written, by a compare-and-set script (per slot and 128 keys) that
// writes only a value still as read. The merge
// script spent Redis' single thread parsing and re-encoding values in
// Lua (BENCHMARKS.md, why the defaults); a read and a CAS cost a
// fraction of it, and a duplicate or stale mark costs the read only. A CAS
// that finds the value changed (another flush wrote the key meanwhile)
// answers the current value and the merge is redone from it.

// casChunk bounds the keys of one casScript or readMarksScript call (Redis runs nothing else
// meanwhile: a few hundred microseconds).
const casChunk = 128

// casAttempts bounds the CAS rounds of one MergeMarks call; keys still
// contended after them are merged by the merge script, which cannot fail
// that way.
const casAttempts = 4

// markChain is the marks of one key in one MergeMarks call, merged in
// their order from the value the key held.
type markChain struct {
	key   receipt.Key
	marks []int  // indexes into the call's marks, in order
	cur   string // the value the chain merges from ("" none)
	next  string // the value after the chain, when it changes the key
	write bool
	gen   int64
	// scripted: merged by the merge script after the CAS attempts ran out.
	scripted bool
	// unloaded: the user's hash is not loaded (redisstore.ErrNotLoaded).
	unloaded bool
}

// MergeMarks merges the gateway's marks like Merge, with two differences:
// a read or private read epoch of receipt.EpochCurrent is resolved to the
// stored read epoch (the greater of both read cursors'; 0 for a new key),
// and a mark whose explicit read or private read epoch is older than it
// is refused whole (Stale; nothing changes), as is one whose explicit
// epoch is ahead of it (EpochAhead: receipt.EpochAhead). Resolved is the mark with its
// epochs resolved: produce that. Delivered has no epoch to resolve (it is
// always 0). Marks of one key apply in their order, as one pipeline of
// merge scripts would apply them. Generation is the user's erasure
// generation, read before the value (a mark that changes nothing) or in
// the CAS that wrote it.
func (s Store) MergeMarks(ctx context.Context, marks []receipt.State) ([]MergeResult, error) {
	return s.MergeMarksFrom(ctx, nil, marks)
}

// MarkValues is what QueueMarkValues read of marks' keys for their merge:
// each key's stored value and its user's generation, as one read in
// MergeMarks would have found them (the compare-and-set then writes only
// values still as read).
type MarkValues struct {
	read map[receipt.Key]storedMark
}

// Unloaded lists the users whose hash vals found not loaded: their
// values say nothing until they are restored (Hydrate).
func (v *MarkValues) Unloaded() []string {
	if v == nil {
		return nil
	}
	var users []string
	seen := map[string]bool{}
	for k, m := range v.read {
		if m.unloaded && !seen[k.User] {
			seen[k.User] = true
			users = append(users, k.User)
		}
	}
	return users
}

// Forget drops what vals read of users' keys (a merge reads them again).
func (v *MarkValues) Forget(users []string) {
	if v == nil || len(users) == 0 {
		return
	}
	drop := make(map[string]bool, len(users))
	for _, u := range users {
		drop[u] = true
	}
	for k := range v.read {
		if drop[k.User] {
			delete(v.read, k)
		}
	}
}

// Stored is the state vals read for k, when it read k's value and could
// decode it (an absent value is the zero state of k).
func (v *MarkValues) Stored(k receipt.Key) (receipt.State, bool) {
	if v == nil {
		return receipt.State{}, false
	}
	m, ok := v.read[k]
	if !ok || m.unloaded {
		return receipt.State{}, false
	}
	st, err := decodeValue(k, m.cur)
	if err != nil {
		return receipt.State{}, false
	}
	st.Key = k
	return st, true
}

type storedMark struct {
	cur      string
	gen      int64
	unloaded bool
}

// MergeMarksFrom is MergeMarks merging from the values vals read (nil:
// none); the keys vals lacks are read first, as MergeMarks does.
func (s Store) MergeMarksFrom(ctx context.Context, vals *MarkValues, marks []receipt.State) ([]MergeResult, error) {
	out := make([]MergeResult, len(marks))
	var chains []*markChain
	byKey := make(map[receipt.Key]*markChain, len(marks))
	for i, m := range marks {
		out[i].State.Key = m.Key
		if err := storable(m, true); err != nil {
			out[i].Err = err
			continue
		}
		c := byKey[m.Key]
		if c == nil {
			c = &markChain{key: m.Key}
			byKey[m.Key] = c
			chains = append(chains, c)
		}
		c.marks = append(c.marks, i)
	}
	if len(chains) == 0 {
		return out, nil
	}
	fail := func(cs []*markChain, err error) ([]MergeResult, error) {
		err = fmt.Errorf("%w: merging marks: %w", redisstore.ErrUnavailable, err)
		for _, c := range cs {
			for _, i := range c.marks {
				out[i].Err = err
			}
		}
		return out, err
	}

	unread := chains
	if vals != nil {
		unread = nil
		for _, c := range chains {
			if v, ok := vals.read[c.key]; ok {
				c.cur, c.gen, c.unloaded = v.cur, v.gen, v.unloaded
			} else {
				unread = append(unread, c)
			}
		}
	}
	if len(unread) > 0 {
		var parse func() error
		if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
			parse = s.queueChainReads(ctx, pipe, s.casGroups(unread))
		}); err != nil {
			return fail(chains, err)
		}
		if err := parse(); err != nil {
			return fail(chains, err)
		}
	}

	// A chain whose user's hash is not loaded merges nothing: its stored
	// value says nothing of what Redis lost.
	pending := make([]*markChain, 0, len(chains))
	for _, c := range chains {
		if c.unloaded {
			notLoaded(c, out)
			continue
		}
		pending = append(pending, c)
	}

	// Merge and write the chains that change their key, until every CAS
	// held or the attempts ran out. A chain that changes nothing is
	// answered by apply (a flush of stale marks runs no script); pending is
	// a slice of its own, as chains is walked again below.
	for attempt := 0; attempt < casAttempts && len(pending) > 0; attempt++ {
		var writes []*markChain
		for _, c := range pending {
			if c.apply(marks, out) {
				writes = append(writes, c)
			}
		}
		pending = nil
		if len(writes) == 0 {
			break
		}
		if s.beforeCAS != nil {
			s.beforeCAS(attempt)
		}
		groups := s.casGroups(writes)
		cmds := make([]*redis.Cmd, len(groups))
		if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
			for j, grp := range groups {
				keys := make([]string, 0, 2*len(grp))
				args := make([]any, 0, 3*len(grp))
				for _, c := range grp {
					keys = append(keys, s.RedisKey(c.key.User), s.redis.TombstoneKey(c.key.User))
					args = append(args, c.key.Channel, c.cur, c.next)
				}
				// Sent once: a CAS sent again after a first that ran sees
				// its own write as another writer's.
				cmds[j] = redisstore.EvalShaOnce(ctx, pipe, casScript, keys, args...)
			}
		}); err != nil {
			return fail(writes, err)
		}
		for j, grp := range groups {
			res, err := cmds[j].Slice()
			if err == nil && len(res) != 3*len(grp) {
				err = fmt.Errorf("%d answers for %d keys", len(res), len(grp))
			}
			if err != nil {
				return fail(writes, err)
			}
			for n, c := range grp {
				written, _ := res[3*n].(int64)
				g, _ := res[3*n+1].(string)
				if c.gen, err = redisstore.ParseGeneration(g); err != nil {
					return fail(writes, err)
				}
				if written == 2 {
					c.unloaded = true
					notLoaded(c, out)
					continue
				}
				if written != 1 {
					// Another writer moved the key: merge again from its value.
					c.cur, _ = res[3*n+2].(string)
					pending = append(pending, c)
				}
			}
		}
	}
	if len(pending) > 0 {
		// Still contended: the merge script applies them atomically.
		var idx []int
		var rest []receipt.State
		for _, c := range pending {
			for _, i := range c.marks {
				idx = append(idx, i)
				rest = append(rest, marks[i])
			}
		}
		for _, c := range pending {
			c.scripted = true
		}
		if s.onScripted != nil {
			s.onScripted(len(rest))
		}
		res, err := s.mergeMarksScript(ctx, rest)
		for j, i := range idx {
			out[i] = res[j]
		}
		if err != nil {
			return out, err
		}
	}
	for _, c := range chains {
		if c.scripted || c.unloaded {
			continue
		}
		for _, i := range c.marks {
			if out[i].Err == nil {
				out[i].Generation = c.gen
			}
		}
	}
	return out, nil
}

// notLoaded answers a chain's marks with redisstore.ErrNotLoaded.
func notLoaded(c *markChain, out []MergeResult) {
	for _, i := range c.marks {
		out[i] = MergeResult{State: receipt.State{Key: c.key}, Err: redisstore.ErrNotLoaded}
	}
}

// apply merges the chain's marks in order from c.cur, setting their
// results, and reports whether the key changes (c.next is then the value
// to write).
func (c *markChain) apply(marks []receipt.State, out []MergeResult) bool {
	v := c.cur
	for _, i := range c.marks {
		r, next, err := mergeOneMark(c.key, v, marks[i])
		r.Err = err
		out[i] = r
		if err == nil {
			v = next
		}
	}
	c.write = v != c.cur
	c.next = v
	return c.write
}

// mergeOneMark merges one mark into the stored value cur ("" none), as the
// merge script's strict merge does: the stored state's private read is
// dropped when not ahead of its read, the mark's EpochCurrent epochs are
// resolved to the stored read epoch, an explicit epoch older than it makes
// the mark stale, one ahead of it is refused (EpochAhead: only
// mark-unread moves the epoch forward), and otherwise receipt.Merge
// applies. It returns the
// result (Resolved: the mark with its epochs resolved) and the value the
// key holds after it. A stored value that cannot be decoded is replaced
// by a mark that moves a cursor (the script did the same), and is an
// error otherwise.
func mergeOneMark(k receipt.Key, cur string, m receipt.State) (MergeResult, string, error) {
	stored, derr := decodeValue(k, cur)
	if derr != nil {
		stored = receipt.State{Key: k}
	}
	base := stored.Canonical()
	e := base.ReadEpoch()
	r := MergeResult{State: stored, Resolved: resolve(m, e)}
	if !m.Read.Position.IsZero() && m.Read.Position.Epoch != receipt.EpochCurrent && m.Read.Position.Epoch < e ||
		!m.PrivateRead.Position.IsZero() && m.PrivateRead.Position.Epoch != receipt.EpochCurrent && m.PrivateRead.Position.Epoch < e {
		r.Stale = true
		return r, cur, derr
	}
	if receipt.EpochAhead(base, m) {
		r.EpochAhead = true
		return r, cur, derr
	}
	merged, moved := receipt.Merge(base, r.Resolved)
	if !moved {
		return r, cur, derr
	}
	merged.PrivateRead.MessageID = ""
	next := string(appendValue(nil, merged))
	st, err := decodeValue(k, next)
	if err != nil {
		return r, cur, err
	}
	r.State, r.Advanced = st, true
	return r, next, nil
}

// casGroups splits chains into casScript calls: at most casChunk keys
// each, and in a cluster only keys of one slot ({user} tags: a user's hash
// and tombstone share it).
func (s Store) casGroups(chains []*markChain) [][]*markChain {
	if _, cluster := s.redis.Client().(*redis.ClusterClient); !cluster {
		return chunk(chains, casChunk)
	}
	bySlot := map[int][]*markChain{}
	var slots []int
	for _, c := range chains {
		slot := redisstore.KeySlot(s.RedisKey(c.key.User))
		if _, ok := bySlot[slot]; !ok {
			slots = append(slots, slot)
		}
		bySlot[slot] = append(bySlot[slot], c)
	}
	var out [][]*markChain
	for _, slot := range slots {
		out = append(out, chunk(bySlot[slot], casChunk)...)
	}
	return out
}

// chunk splits xs into slices of at most n.
func chunk[T any](xs []T, n int) [][]T {
	var out [][]T
	for len(xs) > n {
		out = append(out, xs[:n:n])
		xs = xs[n:]
	}
	if len(xs) > 0 {
		out = append(out, xs)
	}
	return out
}

// queueChainReads adds to pipe the reads of the chains' stored values
// with their users' generations: one script per group (cluster slot and
// casChunk keys), not two commands per key, so that a mark that changes
// nothing is stamped with the generation of the instant its value was
// read. The returned function sets each chain's cur and gen once the
// pipeline ran.
func (s Store) queueChainReads(ctx context.Context, pipe redis.Pipeliner, groups [][]*markChain) func() error {
	reads := make([]*redis.Cmd, len(groups))
	for j, grp := range groups {
		keys := make([]string, 0, 2*len(grp))
		args := make([]any, 0, len(grp))
		for _, c := range grp {
			keys = append(keys, s.RedisKey(c.key.User), s.redis.TombstoneKey(c.key.User))
			args = append(args, c.key.Channel)
		}
		reads[j] = s.redis.QueueReadsWithGeneration(ctx, pipe, keys, args)
	}
	return func() error {
		for j, grp := range groups {
			res, err := reads[j].StringSlice()
			if err == nil && len(res) != 3*len(grp) {
				err = fmt.Errorf("%d answers for %d keys", len(res), len(grp))
			}
			if err != nil {
				return err
			}
			for n, c := range grp {
				if c.gen, err = redisstore.ParseGeneration(res[3*n]); err != nil {
					return err
				}
				c.cur, c.unloaded = res[3*n+1], res[3*n+2] != "1"
			}
		}
		return nil
	}
}

// QueueMarkValues queues on pipe the reads of the stored values of keys
// (each once) with their users' generations, what MergeMarksFrom merges
// from: a write of marks queues them in the pipeline of its checks
// (pkg/gate/seam's LookupForWrite), so the merge's reads share the
// checks' round trip and a write takes two round trips (that one and the
// compare-and-set), not three. The returned function reads the answers
// once the pipeline ran; values that could not be read are left out (the
// merge reads them again). Queue it first in its pipeline: a script
// cache Redis lost is then the pipeline's first error, which Exec mends
// (a missing head, a nil reply, would come first otherwise).
func (s Store) QueueMarkValues(ctx context.Context, pipe redis.Pipeliner, keys []receipt.Key) func() *MarkValues {
	var chains []*markChain
	seen := make(map[receipt.Key]bool, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			chains = append(chains, &markChain{key: k})
		}
	}
	parseReads := s.queueChainReads(ctx, pipe, s.casGroups(chains))
	return func() *MarkValues {
		vals := &MarkValues{}
		if parseReads() == nil {
			vals.read = make(map[receipt.Key]storedMark, len(chains))
			for _, c := range chains {
				vals.read[c.key] = storedMark{cur: c.cur, gen: c.gen, unloaded: c.unloaded}
			}
		}
		return vals
	}
}
