package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/thread"
)

// Threads beside the channels (threadcodec.go has the values):
//
//	th:{channel}   hash: base62(root) → the thread's head
//	tu:{user}      hash: "CHANNEL base62(root)" → the user's register in
//	               that thread; ":loaded" once hydrated from Postgres
//
// The merges are thread.Merge and thread.MergeHead in Go, not ported to
// Lua: the fields are read (a user's with the user's erasure generation,
// in one script), merged, and written by a compare-and-set script that
// writes only a field still holding the value read (and, for a user, the
// generation read). A CAS that finds the field moved answers its value and
// the merge is redone from it, at most threadCASAttempts times.

const (
	// MaxUserThreads bounds a user's registers in Redis: past it the
	// gateway collects the least recently active (pkg/gate).
	MaxUserThreads = 10000
	// ReadThreadsMax bounds the registers UserThreads reads at once:
	// twice the bound, so reads go on while a collection runs.
	ReadThreadsMax = 2 * MaxUserThreads
	// threadCASAttempts bounds the CAS rounds of one key in one call;
	// past the first few, each round waits a random pause that grows,
	// so writers racing on one key fall out of step.
	threadCASAttempts  = 32
	threadCASQuietFrom = 3
)

// ErrTooManyThreads is UserThreads' refusal of a user with more than
// MaxUserThreads registers.
var ErrTooManyThreads = errors.New("too many thread registers to read at once")

// ErrThreadCollected answers a gateway write of a register absent from a
// hash whose registers were collected: it may be in Postgres only (look
// it up, merge it in, write again naming it known).
var ErrThreadCollected = errors.New("thread register collected from redis")

// collectedField marks a user's thread hash from which registers were
// collected (CollectThreads): a register absent from it may be in
// Postgres.
const collectedField = ":collected"

// ErrThreadContended is the failure of a key whose every CAS round found
// it moved by another writer.
var ErrThreadContended = errors.New("thread register contended: every compare-and-set found it moved")

// ThreadHeadsKey is a channel's hash of thread heads.
func (s *Store) ThreadHeadsKey(ch string) string { return s.prefix + "th:{" + ch + "}" }

// UserThreadsKey is a user's hash of thread registers.
func (s *Store) UserThreadsKey(user string) string { return s.prefix + "tu:{" + user + "}" }

// threadCASScript writes a field only where it still holds the expected
// value and, with KEYS[2] (the user's tombstone), the user's erasure
// generation is still the expected one. KEYS[1] = hash; ARGV = field,
// expected value ("" none), expected generation ("-1": no tombstone hash),
// new value, "1" when a user's hash (KEYS[2] given) must be loaded, "1"
// when an absent register was looked up in Postgres. Returns {written
// (0/1), the value found, the generation found ("-1" without KEYS[2] or
// without a tombstone hash)}; written is 2, with nothing written, when
// the hash must be loaded and is not, 3 when the register is absent from
// a collected hash and was not looked up.
var threadCASScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ""
local g = "-1"
if KEYS[2] then
  g = redis.call('HGET', KEYS[2], 'g') or "-1"
  if ARGV[5] == "1" and redis.call('HEXISTS', KEYS[1], ':loaded') == 0 then return {2, cur, g} end
  -- a register absent from a collected hash may be in Postgres only
  if ARGV[5] == "1" and cur == "" and ARGV[6] ~= "1" and redis.call('HEXISTS', KEYS[1], ':collected') == 1 then return {3, cur, g} end
end
if cur ~= ARGV[2] or g ~= ARGV[3] then return {0, cur, g} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return {1, cur, g}
`)

var threadScripts = []*redis.Script{threadCASScript, userThreadsScript, threadHeadScript}

// casCell is one field merged by CAS: the value read, the value to write.
type casCell struct {
	hash, tomb, field string // tomb "": no generation (thread heads)
	// loaded: the write needs the user's hash loaded (a gateway write);
	// repairs and hydrates merge into any.
	loaded bool
	// known: the register was looked up in Postgres for this write (it
	// may be absent from a collected hash: see CollectThreads).
	known bool
	// collected: the hash had registers collected (":collected").
	collected *redis.BoolCmd
	cur, next string // "" none
	gen       int64
	err       error
	// items are the indexes of the call's inputs for this field, in order.
	items []int
}

// runCAS reads the cells, then until every write held or the attempts ran
// out: compute(c) sets c.next from c.cur (and the inputs' results) and
// reports whether it differs; those are written by CAS. A cell still
// contended gets ErrThreadContended; a failed round trip fails the call.
func (s *Store) runCAS(ctx context.Context, cells []*casCell, compute func(c *casCell) bool) error {
	if err := s.readCells(ctx, cells); err != nil {
		return err
	}
	pending := make([]*casCell, 0, len(cells))
	for _, c := range cells {
		if !errors.Is(c.err, ErrNotLoaded) && !errors.Is(c.err, ErrThreadCollected) {
			pending = append(pending, c)
		}
	}
	for attempt := 0; attempt < threadCASAttempts && len(pending) > 0; attempt++ {
		var writes []*casCell
		for _, c := range pending {
			if compute(c) {
				writes = append(writes, c)
			}
		}
		pending = nil
		if len(writes) == 0 {
			return nil
		}
		if s.beforeThreadCAS != nil {
			s.beforeThreadCAS(attempt)
		}
		if attempt >= threadCASQuietFrom {
			pause := time.Duration(rand.Int64N(int64(attempt) * int64(100*time.Microsecond)))
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return s.failCells(writes, fmt.Errorf("%w: writing thread state: %w", ErrUnavailable, ctx.Err()))
			}
		}
		cmds := make([]*redis.Cmd, len(writes))
		if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
			for j, c := range writes {
				keys := []string{c.hash}
				if c.tomb != "" {
					keys = append(keys, c.tomb)
				}
				must, known := "0", "0"
				if c.loaded {
					must = "1"
				}
				if c.known {
					known = "1"
				}
				cmds[j] = threadCASScript.EvalSha(ctx, pipe, keys, c.field, c.cur, strconv.FormatInt(c.gen, 10), c.next, must, known)
			}
		}); err != nil {
			return s.failCells(writes, fmt.Errorf("writing thread state: %w", err))
		}
		for j, c := range writes {
			res, err := cmds[j].Slice()
			if err == nil && len(res) != 3 {
				err = fmt.Errorf("%d answers, want 3", len(res))
			}
			if err != nil {
				return s.failCells(writes, fmt.Errorf("%w: writing thread state: %w", ErrUnavailable, err))
			}
			written, _ := res[0].(int64)
			g, _ := res[2].(string)
			if c.gen, err = parseGeneration(g); err != nil {
				c.err = err
				continue
			}
			if written == 2 {
				c.err = ErrNotLoaded
				continue
			}
			if written == 3 {
				c.err = ErrThreadCollected
				continue
			}
			if written != 1 {
				c.cur, _ = res[1].(string)
				pending = append(pending, c)
			}
		}
	}
	for _, c := range pending {
		c.err = fmt.Errorf("%w: %s %q after %d attempts", ErrThreadContended, c.hash, c.field, threadCASAttempts)
	}
	return nil
}

func (s *Store) failCells(cells []*casCell, err error) error {
	for _, c := range cells {
		c.err = err
	}
	return err
}

// readCells reads each cell's value, and with a tombstone its user's
// generation in the same script (readMarksScript), in one pipeline.
func (s *Store) readCells(ctx context.Context, cells []*casCell) error {
	cmds := make([]redis.Cmder, len(cells))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for j, c := range cells {
			if c.tomb == "" {
				cmds[j] = pipe.HGet(ctx, c.hash, c.field)
			} else {
				cmds[j] = readMarksScript.EvalSha(ctx, pipe, []string{c.hash, c.tomb}, c.field)
				if c.loaded && !c.known {
					c.collected = pipe.HExists(ctx, c.hash, collectedField)
				}
			}
		}
	}); err != nil {
		return s.failCells(cells, fmt.Errorf("reading thread state: %w", err))
	}
	for j, c := range cells {
		c.gen = GenerationUnknown
		switch cmd := cmds[j].(type) {
		case *redis.StringCmd:
			v, err := cmd.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return s.failCells(cells, fmt.Errorf("%w: reading thread state: %w", ErrUnavailable, err))
			}
			c.cur = v
		case *redis.Cmd:
			res, err := cmd.Slice()
			if err == nil && len(res) != 3 {
				err = fmt.Errorf("%d answers, want 3", len(res))
			}
			if err != nil {
				return s.failCells(cells, fmt.Errorf("%w: reading thread state: %w", ErrUnavailable, err))
			}
			g, _ := res[0].(string)
			c.cur, _ = res[1].(string)
			if c.gen, err = parseGeneration(g); err != nil {
				c.err = err
			}
			if loaded, _ := res[2].(string); c.loaded && loaded != "1" {
				c.err = ErrNotLoaded
			} else if c.cur == "" && c.collected != nil && c.collected.Val() {
				c.err = ErrThreadCollected
			}
		}
	}
	return nil
}

// ThreadHeadResult is the outcome of one thread head raise.
type ThreadHeadResult struct {
	// Head is the thread's head after the raise.
	Head thread.Head
	// Advanced is true when the raise moved the head's seq.
	Advanced bool
	Err      error
}

// threadHeadScript max-merges thread heads into a channel's thread head
// hash (thread.MergeHead): a pure max in the script, so a hot thread's
// writers never retry each other as a compare-and-set would. KEYS[1] =
// the hash; ARGV = root field, seq, message id, time (base 62), per head,
// applied in order. Returns {advanced, value} per head. A stored value
// that does not parse reads as none (the merge replaces it).
var threadHeadScript = redis.NewScript(luaCommon + `
local out = {}
for i = 1, #ARGV, 4 do
  local field, seq, msg, at = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3]
  local cur = redis.call('HGET', KEYS[1], field)
  local s, m, t
  if cur then s, m, t = string.match(cur, '^(%w+) (%S*) (%w+)$') end
  local adv, v = 0, cur
  if s and cmp(seq, s) <= 0 then
    if cmp(at, t) > 0 then v = s .. ' ' .. m .. ' ' .. at end
  else
    if t and cmp(t, at) > 0 then at = t end
    adv, v = 1, seq .. ' ' .. msg .. ' ' .. at
  end
  if v ~= cur then redis.call('HSET', KEYS[1], field, v) end
  out[#out+1] = adv out[#out+1] = v
end
return out
`)

// RaiseThreadHeads merges heads into their channels' thread head hashes
// (thread.MergeHead, one script per channel) and returns the head after
// each; heads of one thread apply in their order. err is set when a
// round trip failed.
func (s *Store) RaiseThreadHeads(ctx context.Context, heads []thread.Head) ([]ThreadHeadResult, error) {
	out := make([]ThreadHeadResult, len(heads))
	byChannel := map[string][]int{}
	var order []string
	args := map[string][]any{}
	for i, h := range heads {
		out[i].Head = h
		v, err := encodeThreadHead(h)
		if err != nil {
			out[i].Err = err
			continue
		}
		f := strings.SplitN(v, " ", 3)
		ch := h.Ref.Channel
		if _, ok := byChannel[ch]; !ok {
			order = append(order, ch)
		}
		byChannel[ch] = append(byChannel[ch], i)
		args[ch] = append(args[ch], rootField(h.Ref), f[0], f[1], f[2])
	}
	cmds := make(map[string]*redis.Cmd, len(order))
	_, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for _, ch := range order {
			cmds[ch] = threadHeadScript.EvalSha(ctx, pipe, []string{s.ThreadHeadsKey(ch)}, args[ch]...)
		}
	})
	for _, ch := range order {
		res, cerr := cmds[ch].Slice()
		for j, i := range byChannel[ch] {
			if cerr != nil || len(res) < 2*j+2 {
				out[i].Err = fmt.Errorf("%w: raising the thread head of %s: %v", ErrUnavailable, heads[i].Ref, cerr)
				continue
			}
			adv, _ := res[2*j].(int64)
			v, _ := res[2*j+1].(string)
			h, derr := decodeThreadHead(heads[i].Ref, v)
			if derr != nil {
				out[i].Err = derr
				continue
			}
			out[i].Head, out[i].Advanced = h, adv == 1
		}
	}
	if err == nil {
		var ok []thread.Head
		for i, r := range out {
			if r.Err == nil {
				ok = append(ok, heads[i])
			}
		}
		err = s.rememberReplyIDs(ctx, ok)
	}
	return out, err
}

// ChannelThreadHeads returns every thread head Redis holds of a channel,
// by root (the drift sweep's scan); an undecodable field is skipped
// (skipUndecodable), as ThreadHeads does.
func (s *Store) ChannelThreadHeads(ctx context.Context, ch string) ([]thread.Head, error) {
	m, err := s.rdb.HGetAll(ctx, s.ThreadHeadsKey(ch)).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: reading the thread heads of %s: %w", ErrUnavailable, ch, err)
	}
	out := make([]thread.Head, 0, len(m))
	for f, v := range m {
		root, err := parseB62(f)
		if err != nil {
			s.skipUndecodable()
			continue
		}
		h, err := decodeThreadHead(thread.Ref{Channel: ch, Root: root}, v)
		if err != nil {
			s.skipUndecodable()
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b thread.Head) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

// ThreadStateResult is the outcome of one register update.
type ThreadStateResult struct {
	// State is the register after the update, as stored.
	State thread.State
	// Changed is true when the update changed the stored register.
	Changed bool
	// Generation is the user's erasure generation read with the write (or
	// with the read, when nothing was written); GenerationUnknown when
	// Redis holds no tombstone hash for the user.
	Generation int64
	Err        error
}

// UpdateThreadStates merges, for each key, the register incoming builds
// from the stored one (found: Redis holds one; a mark-unread needs the
// stored epoch) with thread.Merge, by CAS. Keys repeated in one call
// apply in their order, each incoming seeing the register after the
// previous. incoming may be called again for a key whose CAS found it
// moved, with the register then stored. An error from incoming, or a
// register the layout cannot hold, fails that result alone and writes
// nothing for it. err is set when a round trip failed.
//
// It is the gateway's write: a user whose hash is not loaded (Redis lost
// it, or never restored it) has ErrNotLoaded results and nothing written.
//
// A register absent from a hash whose registers were collected
// (CollectThreads) may be in Postgres only: its result is
// ErrThreadCollected, nothing written, unless known (the caller looked it
// up in Postgres and merged it in: MergeThreadStates) names its key.
func (s *Store) UpdateThreadStates(ctx context.Context, keys []thread.Key, mentionCap int, known map[thread.Key]bool,
	incoming func(i int, stored thread.State, found bool) (thread.State, error)) ([]ThreadStateResult, error) {
	return s.updateThreadStates(ctx, keys, mentionCap, true, known, incoming)
}

func (s *Store) updateThreadStates(ctx context.Context, keys []thread.Key, mentionCap int, loaded bool, known map[thread.Key]bool,
	incoming func(i int, stored thread.State, found bool) (thread.State, error)) ([]ThreadStateResult, error) {
	out := make([]ThreadStateResult, len(keys))
	byKey := map[thread.Key]*casCell{}
	var cells []*casCell
	for i, k := range keys {
		out[i].State.Key = k
		c := byKey[k]
		if c == nil {
			c = &casCell{hash: s.UserThreadsKey(k.User), tomb: s.TombstoneKey(k.User), field: threadField(k.Ref), loaded: loaded, known: known[k]}
			byKey[k] = c
			cells = append(cells, c)
		}
		c.items = append(c.items, i)
	}
	err := s.runCAS(ctx, cells, func(c *casCell) bool {
		k := keys[c.items[0]]
		stored, derr := decodeThreadState(k, c.cur)
		if derr != nil {
			s.skipUndecodable()
			stored = thread.State{Key: k}
		}
		found := c.cur != "" && derr == nil
		v := c.cur
		if derr != nil {
			v = ""
		}
		for _, i := range c.items {
			out[i] = ThreadStateResult{State: stored}
			inc, err := incoming(i, stored, found)
			if err == nil {
				inc.Key = k
				err = threadStorable(inc)
			}
			if err != nil {
				out[i].Err = err
				continue
			}
			merged, _ := thread.Merge(stored, inc, mentionCap)
			next, err := encodeThreadState(merged)
			if err == nil && next != v {
				merged, err = decodeThreadState(k, next)
			}
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i] = ThreadStateResult{State: merged, Changed: next != v}
			stored, v, found = merged, next, found || next != ""
		}
		c.next = v
		// "" is never written: the value read could not be decoded and
		// nothing replaced it.
		return c.next != c.cur && c.next != ""
	})
	for _, c := range cells {
		for _, i := range c.items {
			if c.err != nil {
				out[i].Err = c.err
			} else {
				out[i].Generation = c.gen // also for a refused incoming: State is what was read with it
			}
		}
	}
	return out, err
}

// MergeThreadStates merges registers (thread.Merge) into their users'
// hashes, as UpdateThreadStates, loaded or not (the repairs' and the
// hydrate's merge).
func (s *Store) MergeThreadStates(ctx context.Context, states []thread.State, mentionCap int) ([]ThreadStateResult, error) {
	keys := make([]thread.Key, len(states))
	for i, st := range states {
		keys[i] = st.Key
	}
	return s.updateThreadStates(ctx, keys, mentionCap, false, nil, func(i int, _ thread.State, _ bool) (thread.State, error) {
		return states[i], nil
	})
}

// ThreadStates returns the registers Redis holds of keys, nil where it
// holds none (or one it cannot decode: skipUndecodable).
func (s *Store) ThreadStates(ctx context.Context, keys []thread.Key) ([]*thread.State, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			cmds[i] = pipe.HGet(ctx, s.UserThreadsKey(k.User), threadField(k.Ref))
		}
	}); err != nil {
		return nil, fmt.Errorf("reading thread registers: %w", err)
	}
	out := make([]*thread.State, len(keys))
	err := s.readEach(cmds, func(i int, v string) error {
		st, err := decodeThreadState(keys[i], v)
		if err == nil {
			out[i] = &st
		}
		return err
	})
	return out, err
}

// HydrateUserThreads merges the user's durable registers (Postgres') into
// the hash by CAS, as every write, so a register written meanwhile keeps
// what it advanced, and then marks the hash complete. Registers of another
// user, or that the layout cannot hold, fail the call before anything is
// written (the hash is not marked complete). inc is the incarnation
// marker the restore waited for, as for Hydrate.
func (s *Store) HydrateUserThreads(ctx context.Context, user string, states []thread.State, mentionCap int, inc Incarnation) error {
	for _, st := range states {
		if st.Key.User != user {
			return fmt.Errorf("hydrating the threads of %s: a register of %s", user, st.Key.User)
		}
		if err := threadStorable(st); err != nil {
			return fmt.Errorf("hydrating the threads of %s: %w", user, err)
		}
	}
	if len(states) > 0 {
		res, err := s.MergeThreadStates(ctx, states, mentionCap)
		if err != nil {
			return fmt.Errorf("hydrating the threads of %s: %w", user, err)
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("hydrating the threads of %s: %w", user, r.Err)
			}
		}
	}
	return s.markLoaded(ctx, s.UserThreadsKey(user), inc)
}

// ScanThreadUsers returns one SCAN page of the users with a thread
// register hash and the cursor of the next page (the drift sweep's).
func (s *Store) ScanThreadUsers(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, "tu:", cur, count)
	return onlyWhole(ids, rests), next, err
}

// ScanThreadChannels returns one SCAN page of the channels with a thread
// head hash and the cursor of the next page.
func (s *Store) ScanThreadChannels(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	ids, rests, next, err := s.scanTagged(ctx, "th:", cur, count)
	return onlyWhole(ids, rests), next, err
}

// ThreadCounts is the number of each user's thread registers in Redis
// (its markers included).
func (s *Store) ThreadCounts(ctx context.Context, users []string) ([]int64, error) {
	cmds := make([]*redis.IntCmd, len(users))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			cmds[i] = pipe.HLen(ctx, s.UserThreadsKey(u))
		}
	}); err != nil {
		return nil, fmt.Errorf("counting thread registers: %w", err)
	}
	out := make([]int64, len(users))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// collectThreadsScript drops registers still holding what the collector
// read and marks the hash collected. KEYS[1] = tu hash; ARGV = field,
// value pairs. Returns how many went.
var collectThreadsScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
redis.call('HSET', KEYS[1], ':collected', '1')
return n
`)

// CollectThreads drops the registers states from the user's hash where
// they still are as given, and marks the hash collected: a register
// absent from it is then looked up in Postgres before a write
// (ErrThreadCollected). It returns how many went.
func (s *Store) CollectThreads(ctx context.Context, user string, states []thread.State) (int, error) {
	args := make([]any, 0, 2*len(states))
	for _, st := range states {
		v, err := encodeThreadState(st)
		if err != nil {
			return 0, fmt.Errorf("collecting the threads of %s: %w", user, err)
		}
		args = append(args, threadField(st.Key.Ref), v)
	}
	n, err := collectThreadsScript.Run(ctx, s.rdb, []string{s.UserThreadsKey(user)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("%w: collecting the threads of %s: %w", ErrUnavailable, user, err)
	}
	return n, nil
}

// ThreadsCollected reports, per user, whether registers were collected
// from the user's hash.
func (s *Store) ThreadsCollected(ctx context.Context, users []string) (map[string]bool, error) {
	cmds := make([]*redis.BoolCmd, len(users))
	if _, err := s.exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			cmds[i] = pipe.HExists(ctx, s.UserThreadsKey(u), collectedField)
		}
	}); err != nil {
		return nil, fmt.Errorf("reading whether thread registers were collected: %w", err)
	}
	out := make(map[string]bool, len(users))
	for i, c := range cmds {
		if c.Val() {
			out[users[i]] = true
		}
	}
	return out, nil
}

// MarkThreadsCollected marks the user's hash collected (a hydrate that
// loaded only some of the user's registers).
func (s *Store) MarkThreadsCollected(ctx context.Context, user string) error {
	if err := s.rdb.HSet(ctx, s.UserThreadsKey(user), collectedField, "1").Err(); err != nil {
		return fmt.Errorf("%w: marking the threads of %s collected: %w", ErrUnavailable, user, err)
	}
	return nil
}
