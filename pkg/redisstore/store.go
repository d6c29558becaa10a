package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/receipt"
)

// Defaults.
const (
	AddrDefault   = "127.0.0.1:6379"
	PrefixDefault = "receipts:"
	// loadedField marks a hash hydrated from Postgres; it starts with ':'
	// so no channel id can collide with it (receipt.ValidateID).
	loadedField = ":loaded"
	// hydrateChunk bounds one hydrate script call.
	hydrateChunk = 256
)

// ErrUnavailable wraps every Redis failure: the caller treats the real-time
// view as degraded and relies on the durable path and the repairs.
var ErrUnavailable = errors.New("redis unavailable")

// Config configures a Store.
type Config struct {
	// Prefix starts every key. Defaults to PrefixDefault.
	Prefix string
	// Undecodable, when set, counts the stored fields a read skipped
	// because they could not be decoded (a value no writer of this
	// version produces: see SkipUndecodable).
	Undecodable prometheus.Counter
}

// Store is the Redis side of the receipts state.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	layout *layout
	// beforeCAS, in tests, runs between MergeMarks' read and each CAS
	// round (another writer moving a key meanwhile).
	beforeCAS func(attempt int)
	// onScripted, in tests, runs when MergeMarks hands marks to the merge
	// script (keys still contended after casAttempts).
	onScripted func(marks int)
	// undecodable counts the fields reads skipped (nil: not counted).
	undecodable prometheus.Counter
}

// layout is how Merge writes a state: the script and its per-state ARGV.
// Production writes the compact layout; the tests also plug in the previous
// version's, to write v1 values and to compare the two.
type layout struct {
	merge *redis.Script
	args  func(receipt.State) ([]any, error)
}

var compactLayout = &layout{merge: mergeScript, args: compactArgs}

func compactArgs(st receipt.State) ([]any, error) {
	v, err := encodeValue(st)
	if err != nil {
		return nil, err
	}
	return []any{st.Key.Channel, v, "0", v}, nil
}

// New wraps a go-redis client (single node or cluster).
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = PrefixDefault
	}
	return &Store{rdb: rdb, prefix: cfg.Prefix, layout: compactLayout, undecodable: cfg.Undecodable}
}

// Client returns the underlying client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Prefix returns the key prefix.
func (s *Store) Prefix() string { return s.prefix }

// UserKey is the hash holding all of a user's channels. The {user} hash tag
// keeps a user's keys in one Redis Cluster slot.
func (s *Store) UserKey(user string) string { return s.prefix + "u:{" + user + "}" }

// userFromKey inverts UserKey.
func (s *Store) userFromKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+"u:{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	return strings.TrimSuffix(rest, "}"), true
}

// Load registers the store's scripts and extra (a kind's: kind.Scripts)
// so that EVALSHA finds them (go-redis also falls back to EVAL on
// NOSCRIPT, e.g. after a Redis restart).
func (s *Store) Load(ctx context.Context, extra ...*redis.Script) error {
	scripts := []*redis.Script{markerCheckScript, markerRenewScript, markerSwapScript, s.layout.merge, mergeScript, casScript, readMarksScript, hydrateScript, mergeManyScript, markUnreadScript, eraseScript, rememberScript}
	for _, sc := range append(scripts, extra...) {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("%w: loading script: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// Ping checks Redis.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// MergeResult is the outcome of one merge.
type MergeResult struct {
	// State is the key's state after the merge.
	State receipt.State
	// Advanced is true when a cursor moved.
	Advanced bool
	// Resolved is the incoming state with every receipt.EpochCurrent
	// resolved to the stored read epoch (MergeMarks, MarkUnread): what the
	// caller produces to Kafka, so that every consumer merges plain
	// max-registers.
	Resolved receipt.State
	// Stale is true when MergeMarks refused a mark whose explicit epoch is
	// older than the stored read epoch: nothing changed, and the mark must
	// not be produced (the contract says it changes nothing).
	Stale bool
	// EpochAhead is true when MergeMarks refused a mark whose explicit
	// epoch is ahead of the stored read epoch (receipt.EpochAhead):
	// nothing changed, the mark must not be produced, and the caller is
	// told its request is invalid.
	EpochAhead bool
	// SeenEpoch is, for MarkUnread, the read epoch the mark-unread moved
	// past (the client's, or the stored one it resolved): the private read
	// is at the next. With EpochAhead, the stored read epoch.
	SeenEpoch int64
	// Generation is the user's erasure generation read in the merge's
	// script (0: never erased, or a Redis that lost the tombstone): the
	// gateway stamps it on the event (event.StampGeneration).
	Generation int64
	Err        error
}

// Merge max-merges states in one pipeline (one round trip for a batch) and
// returns, per state, the merged value and whether it advanced anything.
// err is set when the pipeline as a whole failed. A state the layout cannot
// hold (a negative number, an id with a space: receipt.State.Validate and
// ValidateID reject both) fails alone, without reaching Redis. This is the
// plain max rule of every repair path; the gateway's marks go through
// MergeMarks.
func (s *Store) Merge(ctx context.Context, states []receipt.State) ([]MergeResult, error) {
	out, err := s.mergeWith(ctx, states, s.layout.args)
	for i := range out {
		out[i].Resolved = states[i]
	}
	return out, err
}

// mergeMarksScript is MergeMarks by the merge script, one per mark in
// one pipeline: the fallback for keys whose CAS kept failing.
func (s *Store) mergeMarksScript(ctx context.Context, marks []receipt.State) ([]MergeResult, error) {
	out, err := s.mergeWith(ctx, marks, func(st receipt.State) ([]any, error) {
		v, err := encodeMark(st)
		if err != nil {
			return nil, err
		}
		fresh, err := encodeValue(resolve(st, 0))
		if err != nil {
			return nil, err
		}
		return []any{st.Key.Channel, v, "1", fresh}, nil
	})
	for i := range out {
		if out[i].Err == nil {
			out[i].Resolved = resolve(marks[i], out[i].Resolved.Read.Position.Epoch)
		}
	}
	return out, err
}

// resolve replaces EpochCurrent in st's read cursors by epoch.
func resolve(st receipt.State, epoch int64) receipt.State {
	if st.Read.Position.Epoch == receipt.EpochCurrent {
		st.Read.Position.Epoch = epoch
	}
	if st.PrivateRead.Position.Epoch == receipt.EpochCurrent {
		st.PrivateRead.Position.Epoch = epoch
	}
	return st
}

// MarkUnread moves the user's private read of k to seq-1 at the epoch
// after seenEpoch (receipt.EpochCurrent: the stored read epoch), resolved
// against the stored state in one script (receipt.MarkUnread); the public
// read does not move. Resolved is the incoming state to produce, State
// the state after, SeenEpoch the epoch used (a retry passing it changes
// nothing), Generation the user's erasure generation read in that script
// (stamp it on the event). EpochAhead, with nothing changed, when
// seenEpoch is ahead of the stored read epoch. seq must be > 0.
func (s *Store) MarkUnread(ctx context.Context, k receipt.Key, seq, seenEpoch int64, deviceID string, nowMs int64) (MergeResult, error) {
	if seq <= 0 || nowMs < 0 || strings.IndexByte(deviceID, ' ') >= 0 || seenEpoch < receipt.EpochCurrent {
		return MergeResult{}, fmt.Errorf("marking %s unread: seq %d, epoch %d, time %d or device %q not storable", k.KafkaKey(), seq, seenEpoch, nowMs, deviceID)
	}
	seen := ""
	if seenEpoch != receipt.EpochCurrent {
		seen = string(appendB62(nil, seenEpoch))
	}
	res, err := markUnreadScript.Run(ctx, s.rdb, []string{s.UserKey(k.User), s.TombstoneKey(k.User)}, k.Channel, string(appendB62(nil, seq-1)), deviceID, string(appendB62(nil, nowMs)),
		string(appendB62(nil, receipt.MaxEpoch)), seen).Slice()
	if err != nil {
		return MergeResult{}, fmt.Errorf("%w: marking %s unread: %w", ErrUnavailable, k.KafkaKey(), err)
	}
	if len(res) >= 4 {
		if limit, _ := res[3].(int64); limit == 3 {
			return MergeResult{}, fmt.Errorf("marking %s unread: %w", k.KafkaKey(), receipt.ErrEpochLimit)
		}
	}
	out, err := mergeResult(k, res)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return MergeResult{}, err
	}
	out.SeenEpoch = out.Resolved.Read.Position.Epoch
	out.Resolved = receipt.MarkUnread(k, seq, out.SeenEpoch)
	out.Resolved.DeviceID, out.Resolved.UpdatedAtUnixMs = deviceID, nowMs
	return out, nil
}

// mergeResult reads a merge script's answer: {changed, value, epoch,
// stale} (the v1 test layout answers the first two only). The resolved
// epoch is carried in Resolved.Read.Position.Epoch for the caller.
func mergeResult(k receipt.Key, res []any) (MergeResult, error) {
	changed, _ := res[0].(int64)
	val, _ := res[1].(string)
	st, err := decodeValue(k, val)
	if err != nil {
		return MergeResult{}, err
	}
	out := MergeResult{State: st, Advanced: changed == 1}
	if len(res) >= 4 {
		e, _ := res[2].(string)
		if out.Resolved.Read.Position.Epoch, err = parseB62(e); err != nil {
			return MergeResult{}, fmt.Errorf("decoding the resolved epoch of %s: %q: %w", k.KafkaKey(), e, err)
		}
		stale, _ := res[3].(int64)
		if stale == 4 {
			return MergeResult{State: receipt.State{Key: k}, Err: ErrNotLoaded}, nil
		}
		out.Stale = stale == 1
		out.EpochAhead = stale == 2
	}
	if len(res) >= 5 {
		g, _ := res[4].(string)
		if out.Generation, err = strconv.ParseInt(g, 10, 64); err != nil {
			return MergeResult{}, fmt.Errorf("decoding the erasure generation of %s: %q: %w", k.KafkaKey(), g, err)
		}
	}
	return out, nil
}

func (s *Store) mergeWith(ctx context.Context, states []receipt.State, args func(receipt.State) ([]any, error)) ([]MergeResult, error) {
	out := make([]MergeResult, len(states))
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(states))
	for i, st := range states {
		argv, err := args(st)
		if err != nil {
			out[i].State.Key, out[i].Err = st.Key, err
			continue
		}
		cmds[i] = s.layout.merge.EvalSha(ctx, pipe, []string{s.UserKey(st.Key.User), s.TombstoneKey(st.Key.User)}, argv...)
	}
	var err error
	if pipe.Len() > 0 {
		_, err = pipe.Exec(ctx)
	}
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis lost its script cache (restart, SCRIPT FLUSH): load, redo.
		if lerr := s.Load(ctx); lerr != nil {
			return nil, lerr
		}
		return s.mergeWith(ctx, states, args)
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		out[i].State.Key = states[i].Key
		res, cerr := cmd.Slice()
		if cerr != nil {
			out[i].Err = fmt.Errorf("%w: merging %s: %w", ErrUnavailable, states[i].Key.KafkaKey(), cerr)
			continue
		}
		r, perr := mergeResult(states[i].Key, res)
		if perr != nil {
			out[i].Err = perr
			continue
		}
		out[i] = r
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return out, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// Get returns a user's states for the listed channels (all when empty) and
// whether the hash is complete, i.e. hydrated from Postgres since it was
// last lost. A missing field in a complete hash means "no state".
func (s *Store) Get(ctx context.Context, user string, channels []string) (states []receipt.State, complete bool, err error) {
	key := s.UserKey(user)
	var got UserStates
	if len(channels) == 0 {
		m, err := s.rdb.HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		got, err = s.userStatesOfHash(user, m)
		if err != nil {
			return nil, false, err
		}
		return got.States, got.Complete, nil
	}
	vals, err := s.rdb.HMGet(ctx, key, append([]string{loadedField}, channels...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if got, err = s.userStatesOfFields(user, channels, vals); err != nil {
		return nil, false, err
	}
	return got.States, got.Complete, nil
}

// UserChannels names a user's channels to read; all of them when Channels
// is empty.
type UserChannels struct {
	User     string
	Channels []string
}

// UserStates is what Get answers for one user.
type UserStates struct {
	States   []receipt.State
	Complete bool
}

// GetMany is Get for many users in one pipeline (one round trip per
// node, where a Get per user costs a round trip each): out[i] answers
// reqs[i].
func (s *Store) GetMany(ctx context.Context, reqs []UserChannels) ([]UserStates, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	all := make([]*redis.MapStringStringCmd, len(reqs))
	some := make([]*redis.SliceCmd, len(reqs))
	_, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, r := range reqs {
			key := s.UserKey(r.User)
			if len(r.Channels) == 0 {
				all[i] = pipe.HGetAll(ctx, key)
			} else {
				some[i] = pipe.HMGet(ctx, key, append([]string{loadedField}, r.Channels...)...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]UserStates, len(reqs))
	for i, r := range reqs {
		if all[i] != nil {
			out[i], err = s.userStatesOfHash(r.User, all[i].Val())
		} else {
			out[i], err = s.userStatesOfFields(r.User, r.Channels, some[i].Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// userStatesOfHash decodes a user's whole hash (HGETALL), skipping the
// fields it cannot decode (SkipUndecodable).
func (s *Store) userStatesOfHash(user string, m map[string]string) (UserStates, error) {
	var out UserStates
	_, out.Complete = m[loadedField]
	for field, val := range m {
		if field == loadedField {
			continue
		}
		st, err := decodeValue(receipt.Key{User: user, Channel: field}, val)
		if err != nil {
			s.SkipUndecodable()
			continue
		}
		out.States = append(out.States, st)
	}
	return out, nil
}

// SkipUndecodable counts a stored field a read skipped because it could
// not be decoded: one bad field (a value no writer of this version
// produces, such as an epoch past what int64 holds) never fails a whole
// user's read or a drift sweep page. The field reads as absent; the next
// merge into it replaces it (the merge script and MergeMarks treat an
// undecodable value as none), and the drift sweep rewrites it from
// Postgres.
func (s *Store) SkipUndecodable() {
	if s.undecodable != nil {
		s.undecodable.Inc()
	}
}

// userStatesOfFields decodes HMGET's answer for the loaded marker and then
// the channels.
func (s *Store) userStatesOfFields(user string, channels []string, vals []any) (UserStates, error) {
	var out UserStates
	out.Complete = vals[0] != nil
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		st, err := decodeValue(receipt.Key{User: user, Channel: channels[i]}, str)
		if err != nil {
			s.SkipUndecodable()
			continue
		}
		out.States = append(out.States, st)
	}
	return out, nil
}

// HydrateMany is Hydrate for several users in one pipeline: each user's
// states (by user, in states) under incs[user]. It returns, per user, nil
// or what failed (ErrMarkerMoved for a marker that moved); err when the
// round trip failed. A user with more states than one chunk of the
// hydrate script is hydrated alone, by Hydrate.
func (s *Store) HydrateMany(ctx context.Context, states map[string][]receipt.State, incs map[string]Incarnation) (map[string]error, error) {
	out := make(map[string]error, len(states))
	cmds := map[string]*redis.Cmd{}
	var big []string
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for user, sts := range states {
			if len(sts) > hydrateChunk {
				big = append(big, user)
				continue
			}
			key := s.UserKey(user)
			argv := make([]any, 0, 2*len(sts)+1)
			keys := []string{key}
			if inc := incs[user]; inc.Gen > 0 {
				keys = append(keys, s.IncarnationKey(key))
				argv = append(argv, strconv.FormatInt(inc.Gen, 10))
			}
			var encErr error
			for _, st := range sts {
				v, err := encodeValue(st)
				if err != nil {
					encErr = fmt.Errorf("hydrating %s: %w", user, err)
					break
				}
				argv = append(argv, st.Key.Channel, v)
			}
			if encErr != nil {
				out[user] = encErr
				continue
			}
			cmds[user] = hydrateScript.EvalSha(ctx, pipe, keys, argv...)
		}
	}); err != nil {
		return nil, fmt.Errorf("hydrating %d users: %w", len(states), err)
	}
	for user, cmd := range cmds {
		n, err := cmd.Int()
		switch {
		case err != nil:
			out[user] = fmt.Errorf("%w: hydrating %s: %w", ErrUnavailable, user, err)
		case n == 0:
			out[user] = fmt.Errorf("hydrating %s: %w", user, ErrMarkerMoved)
		default:
			out[user] = nil
		}
	}
	for _, user := range big {
		out[user] = s.Hydrate(ctx, user, states[user], incs[user])
	}
	return out, nil
}

// Hydrate max-merges a user's durable states into the hash and marks it
// complete. Concurrent writes are safe: every value goes through the merge.
// A state the layout cannot hold fails the call before anything is written
// (the hash is not marked complete). inc is the incarnation marker the
// restore waited for (RestoreFence): the hash is marked complete only if
// it is still the marker (else ErrMarkerMoved, the restore starts over);
// the zero Incarnation checks none.
func (s *Store) Hydrate(ctx context.Context, user string, states []receipt.State, inc Incarnation) error {
	key := s.UserKey(user)
	argvAll := make([]any, 0, 2*len(states))
	for _, st := range states {
		v, err := encodeValue(st)
		if err != nil {
			return fmt.Errorf("hydrating %s: %w", user, err)
		}
		argvAll = append(argvAll, st.Key.Channel, v)
	}
	for start := 0; ; start += hydrateChunk {
		end := min(start+hydrateChunk, len(states))
		argv := argvAll[2*start : 2*end]
		// Only the last chunk sets the marker; earlier chunks merge only.
		sc, keys := hydrateScript, []string{key}
		if end < len(states) {
			sc = mergeManyScript
		} else if inc.Gen > 0 {
			keys = append(keys, s.IncarnationKey(key))
			argv = append([]any{strconv.FormatInt(inc.Gen, 10)}, argv...)
		}
		n, err := sc.Run(ctx, s.rdb, keys, argv...).Int()
		if err != nil {
			return fmt.Errorf("%w: hydrating %s: %w", ErrUnavailable, user, err)
		}
		if end == len(states) {
			if n == 0 {
				return fmt.Errorf("hydrating %s: %w", user, ErrMarkerMoved)
			}
			return nil
		}
	}
}

// ScanCursor is a position in a walk over the users held in Redis (the
// drift sweep's). The zero value starts a walk; Done reports its end. On a
// single server (or a sentinel's master) it is the SCAN cursor. In Redis
// Cluster a SCAN cursor belongs to one node, so the walk visits every
// master in turn, in bounded pages: the cursor names the masters (their
// addresses, fixed when the walk starts), the one being scanned and its
// SCAN cursor.
type ScanCursor struct {
	masters []string
	node    int
	cursor  uint64
	done    bool
	// scanned is the master the page that returned this cursor came from.
	scanned string
}

// Done reports whether the walk is over.
func (c ScanCursor) Done() bool { return c.done }

// Node is the address of the master the next page scans ("" outside
// cluster mode, or before the first page).
func (c ScanCursor) Node() string {
	if c.node < len(c.masters) {
		return c.masters[c.node]
	}
	return ""
}

// Scanned is the address of the master the page that returned this cursor
// was read from ("" outside cluster mode).
func (c ScanCursor) Scanned() string { return c.scanned }

func (c ScanCursor) String() string {
	switch {
	case c.done:
		return "done"
	case c.masters == nil:
		return strconv.FormatUint(c.cursor, 10)
	}
	return fmt.Sprintf("master %d/%d %s, cursor %d", c.node+1, len(c.masters), c.Node(), c.cursor)
}

// ScanUsers returns one bounded page of user ids (SCAN over the prefix, of
// about count keys) and the cursor of the next page. A walk sees every user
// whose hash exists from its start to its end at least once (possibly more
// than once); in cluster mode it ends with an error if a master it has not
// finished is no longer a master (a failover or resharding mid-walk: the
// next walk starts over).
func (s *Store) ScanUsers(ctx context.Context, cur ScanCursor, count int64) ([]string, ScanCursor, error) {
	keys, cur, err := s.scanKeys(ctx, cur, count, s.prefix+"u:{*}")
	users := make([]string, 0, len(keys))
	for _, k := range keys {
		if u, ok := s.userFromKey(k); ok {
			users = append(users, u)
		}
	}
	return users, cur, err
}

// scanKeys returns one bounded page of the keys matching pattern and the
// cursor of the next page, walking every master in cluster mode (see
// ScanUsers).
func (s *Store) scanKeys(ctx context.Context, cur ScanCursor, count int64, pattern string) ([]string, ScanCursor, error) {
	if cur.done {
		return nil, cur, nil
	}
	var node redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		if cur.masters == nil {
			masters, err := clusterMasters(ctx, cc)
			if err != nil {
				return nil, cur, err
			}
			cur.masters = masters
		}
		if len(cur.masters) == 0 {
			return nil, ScanCursor{done: true}, nil
		}
		var err error
		if node, err = clusterMaster(ctx, cc, cur.Node()); err != nil {
			return nil, cur, err
		}
	}
	keys, next, err := node.Scan(ctx, cur.cursor, pattern, count).Result()
	if err != nil {
		return nil, cur, fmt.Errorf("%w: scanning %s: %w", ErrUnavailable, cur, err)
	}
	cur.scanned = cur.Node()
	cur.cursor = next
	if next == 0 {
		cur.node++
		cur.done = cur.node >= len(cur.masters)
	}
	return keys, cur, nil
}

// clusterMasters lists the masters' addresses, sorted.
func clusterMasters(ctx context.Context, cc *redis.ClusterClient) ([]string, error) {
	var mu sync.Mutex
	masters := []string{}
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		masters = append(masters, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listing redis cluster masters: %w", ErrUnavailable, err)
	}
	slices.Sort(masters)
	return slices.Compact(masters), nil
}

// clusterMaster is the client of the master at addr.
func clusterMaster(ctx context.Context, cc *redis.ClusterClient, addr string) (*redis.Client, error) {
	var mu sync.Mutex
	var found *redis.Client
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listing redis cluster masters: %w", ErrUnavailable, err)
	}
	if found == nil {
		return nil, fmt.Errorf("%w: redis cluster node %s is no longer a master (failover or resharding during the walk; the next one starts over)", ErrUnavailable, addr)
	}
	return found, nil
}
