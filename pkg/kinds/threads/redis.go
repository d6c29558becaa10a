package threads

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	channelheads "github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/thread"
)

// The kinds' Redis layout, beside the channels' (codec.go has the values):
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
// the merge is redone from it, at most casAttempts times.

const (
	// MaxUserThreads bounds a user's registers in Redis: past it the
	// gateway collects the least recently active (pkg/gate).
	MaxUserThreads = 10000
	// ReadMax bounds the registers UserThreads reads at once:
	// twice the bound, so reads go on while a collection runs.
	ReadMax = 2 * MaxUserThreads
	// casAttempts bounds the CAS rounds of one key in one call;
	// past the first few, each round waits a random pause that grows,
	// so writers racing on one key fall out of step.
	casAttempts  = 32
	casQuietFrom = 3
)

// ErrTooMany is UserThreads' refusal of a user with more than
// MaxUserThreads registers.
var ErrTooMany = errors.New("too many thread registers to read at once")

// ErrCollected answers a gateway write of a register absent from a
// hash whose registers were collected: it may be in Postgres only (look
// it up, merge it in, write again naming it known).
var ErrCollected = errors.New("thread register collected from redis")

// collectedField marks a user's thread hash from which registers were
// collected (Collect): a register absent from it may be in
// Postgres.
const collectedField = ":collected"

// ErrContended is the failure of a key whose every CAS round found
// it moved by another writer.
var ErrContended = errors.New("thread register contended: every compare-and-set found it moved")

// The keys' tags (after the store's prefix).
const (
	headsTag = "th:"
	userTag  = "tu:"
)

// HeadsKey is a channel's hash of thread heads.
func (s Store) HeadsKey(ch string) string { return s.redis.Prefix() + headsTag + "{" + ch + "}" }

// RedisKey is a user's hash of thread registers.
func (s Store) RedisKey(user string) string { return s.redis.Prefix() + userTag + "{" + user + "}" }

// casScript writes a field only where it still holds the expected
// value and, with KEYS[2] (the user's tombstone), the user's erasure
// generation is still the expected one. KEYS[1] = hash; ARGV = field,
// expected value ("" none), expected generation ("-1": no tombstone hash),
// new value, "1" when a user's hash (KEYS[2] given) must be loaded, "1"
// when an absent register was looked up in Postgres. Returns {written
// (0/1), the value found, the generation found ("-1" without KEYS[2] or
// without a tombstone hash)}; written is 2, with nothing written, when
// the hash must be loaded and is not, 3 when the register is absent from
// a collected hash and was not looked up.
var (
	//go:embed cas.lua
	luaCAS    string
	casScript = redis.NewScript(luaCAS)
)

// Scripts are the kinds' scripts, for redisstore.Store.Load.
var Scripts = []*redis.Script{casScript, userThreadsScript, headScript, collectScript}

// casCell is one field merged by CAS: the value read, the value to write.
type casCell struct {
	hash, tomb, field string // tomb "": no generation (thread heads)
	// loaded: the write needs the user's hash loaded (a gateway write);
	// repairs and hydrates merge into any.
	loaded bool
	// known: the register was looked up in Postgres for this write (it
	// may be absent from a collected hash: see Collect).
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
// contended gets ErrContended; a failed round trip fails the call.
func (s Store) runCAS(ctx context.Context, cells []*casCell, compute func(c *casCell) bool) error {
	if err := s.readCells(ctx, cells); err != nil {
		return err
	}
	pending := make([]*casCell, 0, len(cells))
	for _, c := range cells {
		if !errors.Is(c.err, redisstore.ErrNotLoaded) && !errors.Is(c.err, ErrCollected) {
			pending = append(pending, c)
		}
	}
	for attempt := 0; attempt < casAttempts && len(pending) > 0; attempt++ {
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
		if s.beforeCAS != nil {
			s.beforeCAS(attempt)
		}
		if attempt >= casQuietFrom {
			pause := time.Duration(rand.Int64N(int64(attempt) * int64(100*time.Microsecond)))
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return s.failCells(writes, fmt.Errorf("%w: writing thread state: %w", redisstore.ErrUnavailable, ctx.Err()))
			}
		}
		cmds := make([]*redis.Cmd, len(writes))
		if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
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
				// Sent once: a CAS sent again after a first that ran sees
				// its own write as another writer's.
				cmds[j] = redisstore.EvalShaOnce(ctx, pipe, casScript, keys, c.field, c.cur, strconv.FormatInt(c.gen, 10), c.next, must, known)
			}
		}, Scripts...); err != nil {
			return s.failCells(writes, fmt.Errorf("writing thread state: %w", err))
		}
		for j, c := range writes {
			res, err := cmds[j].Slice()
			if err == nil && len(res) != 3 {
				err = fmt.Errorf("%d answers, want 3", len(res))
			}
			if err != nil {
				return s.failCells(writes, fmt.Errorf("%w: writing thread state: %w", redisstore.ErrUnavailable, err))
			}
			written, _ := res[0].(int64)
			g, _ := res[2].(string)
			if c.gen, err = redisstore.ParseGeneration(g); err != nil {
				c.err = err
				continue
			}
			if written == 2 {
				c.err = redisstore.ErrNotLoaded
				continue
			}
			if written == 3 {
				c.err = ErrCollected
				continue
			}
			if written != 1 {
				c.cur, _ = res[1].(string)
				pending = append(pending, c)
			}
		}
	}
	for _, c := range pending {
		c.err = fmt.Errorf("%w: %s %q after %d attempts", ErrContended, c.hash, c.field, casAttempts)
	}
	return nil
}

func (s Store) failCells(cells []*casCell, err error) error {
	for _, c := range cells {
		c.err = err
	}
	return err
}

// readCells reads each cell's value, and with a tombstone its user's
// generation in the same script (readMarksScript), in one pipeline.
func (s Store) readCells(ctx context.Context, cells []*casCell) error {
	cmds := make([]redis.Cmder, len(cells))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for j, c := range cells {
			if c.tomb == "" {
				cmds[j] = pipe.HGet(ctx, c.hash, c.field)
			} else {
				cmds[j] = s.redis.QueueReadWithGeneration(ctx, pipe, c.hash, c.tomb, c.field)
				if c.loaded && !c.known {
					c.collected = pipe.HExists(ctx, c.hash, collectedField)
				}
			}
		}
	}, Scripts...); err != nil {
		return s.failCells(cells, fmt.Errorf("reading thread state: %w", err))
	}
	for j, c := range cells {
		c.gen = redisstore.GenerationUnknown
		switch cmd := cmds[j].(type) {
		case *redis.StringCmd:
			v, err := cmd.Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return s.failCells(cells, fmt.Errorf("%w: reading thread state: %w", redisstore.ErrUnavailable, err))
			}
			c.cur = v
		case *redis.Cmd:
			res, err := cmd.Slice()
			if err == nil && len(res) != 3 {
				err = fmt.Errorf("%d answers, want 3", len(res))
			}
			if err != nil {
				return s.failCells(cells, fmt.Errorf("%w: reading thread state: %w", redisstore.ErrUnavailable, err))
			}
			g, _ := res[0].(string)
			c.cur, _ = res[1].(string)
			if c.gen, err = redisstore.ParseGeneration(g); err != nil {
				c.err = err
			}
			if loaded, _ := res[2].(string); c.loaded && loaded != "1" {
				c.err = redisstore.ErrNotLoaded
			} else if c.cur == "" && c.collected != nil && c.collected.Val() {
				c.err = ErrCollected
			}
		}
	}
	return nil
}

// HeadResult is the outcome of one thread head raise.
type HeadResult struct {
	// Head is the thread's head after the raise.
	Head thread.Head
	// Advanced is true when the raise moved the head's seq.
	Advanced bool
	Err      error
}

// headScript max-merges thread heads into a channel's thread head
// hash (thread.MergeHead): a pure max in the script, so a hot thread's
// writers never retry each other as a compare-and-set would. KEYS[1] =
// the hash; ARGV = root field, seq, message id, time (base 62), per head,
// applied in order. Returns {advanced, value} per head. A stored value
// that does not parse reads as none (the merge replaces it).
var (
	//go:embed head.lua
	luaHead    string
	headScript = redis.NewScript(redisstore.LuaCommon + luaHead)
)

// RaiseHeads merges heads into their channels' thread head hashes
// (thread.MergeHead, one script per channel) and returns the head after
// each; heads of one thread apply in their order. err is set when a
// round trip failed.
func (s Store) RaiseHeads(ctx context.Context, heads []thread.Head) ([]HeadResult, error) {
	out := make([]HeadResult, len(heads))
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
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for _, ch := range order {
			cmds[ch] = headScript.EvalSha(ctx, pipe, []string{s.HeadsKey(ch)}, args[ch]...)
		}
	}, Scripts...)
	for _, ch := range order {
		res, cerr := cmds[ch].Slice()
		for j, i := range byChannel[ch] {
			if cerr != nil || len(res) < 2*j+2 {
				out[i].Err = fmt.Errorf("%w: raising the thread head of %s: %v", redisstore.ErrUnavailable, heads[i].Ref, cerr)
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
		err = channelheads.NewStore(nil, s.redis).RememberReplyIDs(ctx, ok)
	}
	return out, err
}

// ChannelHeads returns every thread head Redis holds of a channel,
// by root (the drift sweep's scan); an undecodable field is skipped
// (skipUndecodable), as HeadsRedis does.
func (s Store) ChannelHeads(ctx context.Context, ch string) ([]thread.Head, error) {
	m, err := s.redis.Client().HGetAll(ctx, s.HeadsKey(ch)).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: reading the thread heads of %s: %w", redisstore.ErrUnavailable, ch, err)
	}
	out := make([]thread.Head, 0, len(m))
	for f, v := range m {
		root, err := redisstore.ParseB62(f)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		h, err := decodeThreadHead(thread.Ref{Channel: ch, Root: root}, v)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b thread.Head) int { return a.Ref.Compare(b.Ref) })
	return out, nil
}

// StateResult is the outcome of one register update.
type StateResult struct {
	// State is the register after the update, as stored.
	State thread.State
	// Changed is true when the update changed the stored register.
	Changed bool
	// Generation is the user's erasure generation read with the write (or
	// with the read, when nothing was written); redisstore.GenerationUnknown when
	// Redis holds no tombstone hash for the user.
	Generation int64
	Err        error
}

// UpdateStates merges, for each key, the register incoming builds
// from the stored one (found: Redis holds one; a mark-unread needs the
// stored epoch) with thread.Merge, by CAS. Keys repeated in one call
// apply in their order, each incoming seeing the register after the
// previous. incoming may be called again for a key whose CAS found it
// moved, with the register then stored. An error from incoming, or a
// register the layout cannot hold, fails that result alone and writes
// nothing for it. err is set when a round trip failed.
//
// It is the gateway's write: a user whose hash is not loaded (Redis lost
// it, or never restored it) has redisstore.ErrNotLoaded results and nothing written.
//
// A register absent from a hash whose registers were collected
// (Collect) may be in Postgres only: its result is
// ErrCollected, nothing written, unless known (the caller looked it
// up in Postgres and merged it in: MergeStates) names its key.
func (s Store) UpdateStates(ctx context.Context, keys []thread.Key, known map[thread.Key]bool,
	incoming func(i int, stored thread.State, found bool) (thread.State, error)) ([]StateResult, error) {
	return s.updateStates(ctx, keys, true, known, incoming)
}

func (s Store) updateStates(ctx context.Context, keys []thread.Key, loaded bool, known map[thread.Key]bool,
	incoming func(i int, stored thread.State, found bool) (thread.State, error)) ([]StateResult, error) {
	out := make([]StateResult, len(keys))
	byKey := map[thread.Key]*casCell{}
	var cells []*casCell
	for i, k := range keys {
		out[i].State.Key = k
		c := byKey[k]
		if c == nil {
			c = &casCell{hash: s.RedisKey(k.User), tomb: s.redis.TombstoneKey(k.User), field: threadField(k.Ref), loaded: loaded, known: known[k]}
			byKey[k] = c
			cells = append(cells, c)
		}
		c.items = append(c.items, i)
	}
	err := s.runCAS(ctx, cells, func(c *casCell) bool {
		k := keys[c.items[0]]
		stored, derr := decodeThreadState(k, c.cur)
		if derr != nil {
			s.redis.SkipUndecodable()
			stored = thread.State{Key: k}
		}
		found := c.cur != "" && derr == nil
		v := c.cur
		if derr != nil {
			v = ""
		}
		for _, i := range c.items {
			out[i] = StateResult{State: stored}
			inc, err := incoming(i, stored, found)
			if err == nil {
				inc.Key = k
				err = threadStorable(inc)
			}
			if err != nil {
				out[i].Err = err
				continue
			}
			merged, _ := thread.Merge(stored, inc, s.mentionCap)
			next, err := encodeThreadState(merged)
			if err == nil && next != v {
				merged, err = decodeThreadState(k, next)
			}
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i] = StateResult{State: merged, Changed: next != v}
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

// MergeStates merges registers (Merge) into their users'
// hashes, as UpdateStates, loaded or not (the repairs' and the
// hydrate's merge).
func (s Store) MergeStates(ctx context.Context, states []thread.State) ([]StateResult, error) {
	keys := make([]thread.Key, len(states))
	for i, st := range states {
		keys[i] = st.Key
	}
	return s.updateStates(ctx, keys, false, nil, func(i int, _ thread.State, _ bool) (thread.State, error) {
		return states[i], nil
	})
}

// StatesRedis returns the registers Redis holds of keys, nil where it
// holds none (or one it cannot decode: skipUndecodable).
func (s Store) StatesRedis(ctx context.Context, keys []thread.Key) ([]*thread.State, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, k := range keys {
			cmds[i] = pipe.HGet(ctx, s.RedisKey(k.User), threadField(k.Ref))
		}
	}, Scripts...); err != nil {
		return nil, fmt.Errorf("reading thread registers: %w", err)
	}
	out := make([]*thread.State, len(keys))
	err := s.redis.ReadEach(cmds, func(i int, v string) error {
		st, err := decodeThreadState(keys[i], v)
		if err == nil {
			out[i] = &st
		}
		return err
	})
	return out, err
}

// HydrateUser merges the user's durable registers (Postgres') into
// the hash by CAS, as every write, so a register written meanwhile keeps
// what it advanced, and then marks the hash complete. Registers of another
// user, or that the layout cannot hold, fail the call before anything is
// written (the hash is not marked complete). inc is the incarnation
// marker the restore waited for, as for Hydrate.
func (s Store) HydrateUser(ctx context.Context, user string, states []thread.State, inc redisstore.Incarnation) error {
	for _, st := range states {
		if st.Key.User != user {
			return fmt.Errorf("hydrating the threads of %s: a register of %s", user, st.Key.User)
		}
		if err := threadStorable(st); err != nil {
			return fmt.Errorf("hydrating the threads of %s: %w", user, err)
		}
	}
	if len(states) > 0 {
		res, err := s.MergeStates(ctx, states)
		if err != nil {
			return fmt.Errorf("hydrating the threads of %s: %w", user, err)
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("hydrating the threads of %s: %w", user, r.Err)
			}
		}
	}
	return s.redis.MarkLoaded(ctx, s.RedisKey(user), inc)
}

// ScanUsers returns one SCAN page of the users with a thread
// register hash and the cursor of the next page (the drift sweep's).
func (s Store) ScanUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, userTag, cur, count)
}

// ScanChannels returns one SCAN page of the channels with a thread
// head hash and the cursor of the next page.
func (s Store) ScanChannels(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, headsTag, cur, count)
}

// Counts is the number of each user's thread registers in Redis
// (its markers included).
func (s Store) Counts(ctx context.Context, users []string) ([]int64, error) {
	cmds := make([]*redis.IntCmd, len(users))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			cmds[i] = pipe.HLen(ctx, s.RedisKey(u))
		}
	}, Scripts...); err != nil {
		return nil, fmt.Errorf("counting thread registers: %w", err)
	}
	out := make([]int64, len(users))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// collectScript drops registers still holding what the collector
// read and marks the hash collected. KEYS[1] = tu hash; ARGV = field,
// value pairs. Returns how many went.
var (
	//go:embed collect.lua
	luaCollect    string
	collectScript = redis.NewScript(luaCollect)
)

// Collect drops the registers states from the user's hash where
// they still are as given, and marks the hash collected: a register
// absent from it is then looked up in Postgres before a write
// (ErrCollected). It returns how many went.
func (s Store) Collect(ctx context.Context, user string, states []thread.State) (int, error) {
	args := make([]any, 0, 2*len(states))
	for _, st := range states {
		v, err := encodeThreadState(st)
		if err != nil {
			return 0, fmt.Errorf("collecting the threads of %s: %w", user, err)
		}
		args = append(args, threadField(st.Key.Ref), v)
	}
	n, err := collectScript.Run(ctx, s.redis.Client(), []string{s.RedisKey(user)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("%w: collecting the threads of %s: %w", redisstore.ErrUnavailable, user, err)
	}
	return n, nil
}

// Collected reports, per user, whether registers were collected
// from the user's hash.
func (s Store) Collected(ctx context.Context, users []string) (map[string]bool, error) {
	cmds := make([]*redis.BoolCmd, len(users))
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			cmds[i] = pipe.HExists(ctx, s.RedisKey(u), collectedField)
		}
	}, Scripts...); err != nil {
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

// MarkCollected marks the user's hash collected (a hydrate that
// loaded only some of the user's registers).
func (s Store) MarkCollected(ctx context.Context, user string) error {
	if err := s.redis.Client().HSet(ctx, s.RedisKey(user), collectedField, "1").Err(); err != nil {
		return fmt.Errorf("%w: marking the threads of %s collected: %w", redisstore.ErrUnavailable, user, err)
	}
	return nil
}
