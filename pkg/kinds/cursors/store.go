package cursors

// A user's cursors live in one hash, the user's hash (RedisKey):
//
//	u:{user}   hash: a field per channel, the channel id, holding the
//	           user's read, delivered and private read cursors there
//	           (codec.go); ":loaded" once the hash was restored from
//	           Postgres (a read then trusts it whole).
//
// The {user} hash tag keeps the hash in the slot of the user's tombstone
// and fences, so that a mark's script reads the erasure generation in the
// same call as it writes.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Store is the kind's Redis side over the driver, what the gateway, the
// Spec and the tests call. It is a pointer and the layout it writes: make
// one where it is needed.
type Store struct {
	redis  *redisstore.Store
	layout *layout
	// beforeCAS, in tests, runs between MergeMarks' read and each CAS
	// round (another writer moving a key meanwhile).
	beforeCAS func(attempt int)
	// onScripted, in tests, runs when MergeMarks hands marks to the merge
	// script (keys still contended after casAttempts).
	onScripted func(marks int)
}

// NewStore is the kind's storage on rs.
func NewStore(rs *redisstore.Store) Store { return Store{redis: rs, layout: compactLayout} }

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
		if out.Resolved.Read.Position.Epoch, err = redisstore.ParseB62(e); err != nil {
			return MergeResult{}, fmt.Errorf("decoding the resolved epoch of %s: %q: %w", k.KafkaKey(), e, err)
		}
		stale, _ := res[3].(int64)
		if stale == 4 {
			return MergeResult{State: receipt.State{Key: k}, Err: redisstore.ErrNotLoaded}, nil
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

// RedisKey is the user's hash, holding the user's cursors of every
// channel.
func (s Store) RedisKey(user string) string { return s.redis.Prefix() + "u:{" + user + "}" }

// Merge max-merges states in one pipeline (one round trip for a batch) and
// returns, per state, the merged value and whether it advanced anything.
// err is set when the pipeline as a whole failed. A state the layout cannot
// hold (a negative number, an id with a space: receipt.State.Validate and
// ValidateID reject both) fails alone, without reaching Redis. This is the
// plain max rule of every repair path; the gateway's marks go through
// MergeMarks.
func (s Store) Merge(ctx context.Context, states []receipt.State) ([]MergeResult, error) {
	out, err := s.mergeWith(ctx, states, s.layout.args)
	for i := range out {
		out[i].Resolved = states[i]
	}
	return out, err
}

// mergeMarksScript is MergeMarks by the merge script, one per mark in
// one pipeline: the fallback for keys whose CAS kept failing.
func (s Store) mergeMarksScript(ctx context.Context, marks []receipt.State) ([]MergeResult, error) {
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

// MarkUnread moves the user's private read of k to seq-1 at the epoch
// after seenEpoch (receipt.EpochCurrent: the stored read epoch), resolved
// against the stored state in one script (receipt.MarkUnread); the public
// read does not move. Resolved is the incoming state to produce, State
// the state after, SeenEpoch the epoch used (a retry passing it changes
// nothing), Generation the user's erasure generation read in that script
// (stamp it on the event). EpochAhead, with nothing changed, when
// seenEpoch is ahead of the stored read epoch. seq must be > 0.
func (s Store) MarkUnread(ctx context.Context, k receipt.Key, seq, seenEpoch int64, deviceID string, nowMs int64) (MergeResult, error) {
	if seq <= 0 || nowMs < 0 || strings.IndexByte(deviceID, ' ') >= 0 || seenEpoch < receipt.EpochCurrent {
		return MergeResult{}, fmt.Errorf("marking %s unread: seq %d, epoch %d, time %d or device %q not storable", k.KafkaKey(), seq, seenEpoch, nowMs, deviceID)
	}
	seen := ""
	if seenEpoch != receipt.EpochCurrent {
		seen = string(redisstore.AppendB62(nil, seenEpoch))
	}
	// Sent once: a mark-unread sent again after a first that ran would
	// open an epoch more and answer for it.
	var cmd *redis.Cmd
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		cmd = redisstore.EvalShaOnce(ctx, pipe, markUnreadScript, []string{s.RedisKey(k.User), s.redis.TombstoneKey(k.User)}, k.Channel, string(redisstore.AppendB62(nil, seq-1)), deviceID, string(redisstore.AppendB62(nil, nowMs)),
			string(redisstore.AppendB62(nil, receipt.MaxEpoch)), seen)
	}, markUnreadScript)
	var res []any
	if err == nil {
		res, err = cmd.Slice()
	}
	if err != nil {
		return MergeResult{}, fmt.Errorf("%w: marking %s unread: %w", redisstore.ErrUnavailable, k.KafkaKey(), err)
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

func (s Store) mergeWith(ctx context.Context, states []receipt.State, args func(receipt.State) ([]any, error)) ([]MergeResult, error) {
	out := make([]MergeResult, len(states))
	cmds := make([]*redis.Cmd, len(states))
	// Exec loads the layout's script again when Redis lost its script
	// cache (restart, SCRIPT FLUSH) and runs the pipeline once more.
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, st := range states {
			argv, aerr := args(st)
			if aerr != nil {
				out[i].State.Key, out[i].Err = st.Key, aerr
				continue
			}
			// Sent once: a merge sent again after a first that ran
			// answers that its own write advanced nothing.
			cmds[i] = redisstore.EvalShaOnce(ctx, pipe, s.layout.merge, []string{s.RedisKey(st.Key.User), s.redis.TombstoneKey(st.Key.User)}, argv...)
		}
	}, s.layout.merge)
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		out[i].State.Key = states[i].Key
		res, cerr := cmd.Slice()
		if cerr != nil {
			out[i].Err = fmt.Errorf("%w: merging %s: %w", redisstore.ErrUnavailable, states[i].Key.KafkaKey(), cerr)
			continue
		}
		r, perr := mergeResult(states[i].Key, res)
		if perr != nil {
			out[i].Err = perr
			continue
		}
		out[i] = r
	}
	return out, err
}

// Get returns a user's states for the listed channels (all when empty) and
// whether the hash is complete, i.e. hydrated from Postgres since it was
// last lost. A missing field in a complete hash means "no state".
func (s Store) Get(ctx context.Context, user string, channels []string) (states []receipt.State, complete bool, err error) {
	key := s.RedisKey(user)
	var got UserStates
	if len(channels) == 0 {
		m, err := s.redis.Client().HGetAll(ctx, key).Result()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
		}
		got, err = s.userStatesOfHash(user, m)
		if err != nil {
			return nil, false, err
		}
		return got.States, got.Complete, nil
	}
	vals, err := s.redis.Client().HMGet(ctx, key, append([]string{redisstore.LoadedField}, channels...)...).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
	}
	if got, err = s.userStatesOfFields(user, channels, vals); err != nil {
		return nil, false, err
	}
	return got.States, got.Complete, nil
}

// GetMany is Get for many users in one pipeline (one round trip per
// node, where a Get per user costs a round trip each): out[i] answers
// reqs[i].
func (s Store) GetMany(ctx context.Context, reqs []UserChannels) ([]UserStates, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	all := make([]*redis.MapStringStringCmd, len(reqs))
	some := make([]*redis.SliceCmd, len(reqs))
	_, err := s.redis.Client().Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, r := range reqs {
			key := s.RedisKey(r.User)
			if len(r.Channels) == 0 {
				all[i] = pipe.HGetAll(ctx, key)
			} else {
				some[i] = pipe.HMGet(ctx, key, append([]string{redisstore.LoadedField}, r.Channels...)...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", redisstore.ErrUnavailable, err)
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
func (s Store) userStatesOfHash(user string, m map[string]string) (UserStates, error) {
	var out UserStates
	_, out.Complete = m[redisstore.LoadedField]
	for field, val := range m {
		if field == redisstore.LoadedField {
			continue
		}
		st, err := decodeValue(receipt.Key{User: user, Channel: field}, val)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		out.States = append(out.States, st)
	}
	return out, nil
}

// userStatesOfFields decodes HMGET's answer for the loaded marker and then
// the channels.
func (s Store) userStatesOfFields(user string, channels []string, vals []any) (UserStates, error) {
	var out UserStates
	out.Complete = vals[0] != nil
	for i, v := range vals[1:] {
		str, ok := v.(string)
		if !ok {
			continue
		}
		st, err := decodeValue(receipt.Key{User: user, Channel: channels[i]}, str)
		if err != nil {
			s.redis.SkipUndecodable()
			continue
		}
		out.States = append(out.States, st)
	}
	return out, nil
}

// HydrateMany is Hydrate for several users in one pipeline: each user's
// states (by user, in states) under incs[user]. It returns, per user, nil
// or what failed (redisstore.ErrMarkerMoved for a marker that moved); err when the
// round trip failed. A user with more states than one chunk of the
// hydrate script is hydrated alone, by Hydrate.
func (s Store) HydrateMany(ctx context.Context, states map[string][]receipt.State, incs map[string]redisstore.Incarnation) (map[string]error, error) {
	out := make(map[string]error, len(states))
	cmds := map[string]*redis.Cmd{}
	var big []string
	if _, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for user, sts := range states {
			if len(sts) > redisstore.HydrateChunk {
				big = append(big, user)
				continue
			}
			// Users restored together have no fence (Restorer.cursorsBatch).
			keys, argv := s.hydrateHead(user, incs[user], "", 2*len(sts))
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
			out[user] = fmt.Errorf("%w: hydrating %s: %w", redisstore.ErrUnavailable, user, err)
		case n == 0:
			out[user] = fmt.Errorf("hydrating %s: %w", user, redisstore.ErrMarkerMoved)
		default:
			out[user] = nil
		}
	}
	for _, user := range big {
		out[user] = s.HydrateAfterFence(ctx, user, states[user], incs[user], "")
	}
	return out, nil
}

// Hydrate max-merges a user's durable states into the hash and marks it
// complete. Concurrent writes are safe: every value goes through the merge.
// A state the layout cannot hold fails the call before anything is written
// (the hash is not marked complete). inc is the incarnation marker the
// restore waited for (RestoreFence): the hash is marked complete only if
// it is still the marker (else redisstore.ErrMarkerMoved, the restore starts over);
// the zero redisstore.Incarnation checks none. The user has no fence
// (else ErrMarkerMoved): see HydrateAfterFence.
func (s Store) Hydrate(ctx context.Context, user string, states []receipt.State, inc redisstore.Incarnation) error {
	return s.HydrateAfterFence(ctx, user, states, inc, "")
}

// HydrateAfterFence is Hydrate by a restore that waited for the user's
// fence (UserFenceKey; "" none) before it read states: the hash is marked
// complete only if the fence is still that one. An unload since (a
// degraded write, UnloadUsers) left a newer fence, whose records states
// may lack: marking the hash complete then would let the next write
// merge over a hash without them, so it returns redisstore.ErrMarkerMoved
// and the restore starts over, waiting for the new fence.
func (s Store) HydrateAfterFence(ctx context.Context, user string, states []receipt.State, inc redisstore.Incarnation, fence string) error {
	key := s.RedisKey(user)
	argvAll := make([]any, 0, 2*len(states))
	for _, st := range states {
		v, err := encodeValue(st)
		if err != nil {
			return fmt.Errorf("hydrating %s: %w", user, err)
		}
		argvAll = append(argvAll, st.Key.Channel, v)
	}
	for start := 0; ; start += redisstore.HydrateChunk {
		end := min(start+redisstore.HydrateChunk, len(states))
		argv := argvAll[2*start : 2*end]
		// Only the last chunk sets the marker; earlier chunks merge only.
		sc, keys := hydrateScript, []string{key}
		if end < len(states) {
			sc = mergeManyScript
		} else {
			var head []any
			keys, head = s.hydrateHead(user, inc, fence, len(argv))
			argv = append(head, argv...)
		}
		n, err := sc.Run(ctx, s.redis.Client(), keys, argv...).Int()
		if err != nil {
			return fmt.Errorf("%w: hydrating %s: %w", redisstore.ErrUnavailable, user, err)
		}
		if end == len(states) {
			if n == 0 {
				return fmt.Errorf("hydrating %s: %w", user, redisstore.ErrMarkerMoved)
			}
			return nil
		}
	}
}

// hydrateHead is what hydrateScript takes before the channels' values:
// its keys (the user's hash and fence, the incarnation marker when inc
// has one) and its first arguments (the fence the restore waited for, the
// marker's generation), with room for n more.
func (s Store) hydrateHead(user string, inc redisstore.Incarnation, fence string, n int) ([]string, []any) {
	key := s.RedisKey(user)
	keys := []string{key, s.redis.UserFenceKey(user)}
	argv := make([]any, 0, 2+n)
	argv = append(argv, fence)
	if inc.Gen > 0 {
		keys = append(keys, s.redis.IncarnationKey(key))
		argv = append(argv, strconv.FormatInt(inc.Gen, 10))
	}
	return keys, argv
}

// ScanUsers returns one bounded page of user ids (SCAN over the prefix, of
// about count keys) and the cursor of the next page. A walk sees every user
// whose hash exists from its start to its end at least once (possibly more
// than once); in cluster mode it ends with an error if a master it has not
// finished is no longer a master (a failover or resharding mid-walk: the
// next walk starts over).
func (s Store) ScanUsers(ctx context.Context, cur redisstore.ScanCursor, count int64) ([]string, redisstore.ScanCursor, error) {
	return s.redis.ScanTagged(ctx, "u:", cur, count)
}

// UnloadUsers marks the users' cursor hashes not loaded and leaves fence
// for their next restore.
func (s Store) UnloadUsers(ctx context.Context, users []string, fence string) error {
	_, err := s.redis.Exec(ctx, func(pipe redis.Pipeliner) {
		for _, u := range users {
			pipe.Set(ctx, s.redis.UserFenceKey(u), fence, redisstore.UserFenceTTL)
			pipe.HDel(ctx, s.RedisKey(u), redisstore.LoadedField)
		}
	})
	if err != nil {
		return fmt.Errorf("unloading %d users: %w", len(users), err)
	}
	return nil
}
