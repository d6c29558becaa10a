package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis' own record of losing data: the incarnation marker.
//
// Redis may lose what it holds (a restart without persistence, FLUSHALL,
// an eviction, a failover to a replica that had not received the last
// writes), and a lost hash looks like a user who has no state. Postgres
// holds the durable state, but only what the persister has written: a
// mark acknowledged a moment before the loss may still be between Kafka
// and Postgres. So a restore from Postgres after a loss must wait until
// the persister has written everything that was on the topic when the
// loss was seen (a fence: grouplag.Fence), and a restore of a user who is
// new (nothing was lost) must not wait at all.
//
// The marker tells them apart. One string per Redis node's worth of keys
// (in a cluster, one per slot, so that it moves and fails over with the
// keys it speaks for), written when a gateway first finds it missing:
//
//	GEN REPLID EVICTED FENCE
//
// GEN is a number unique to this incarnation (Redis' clock in µs, above
// the one it replaces), REPLID the node's replication id when it was
// written, EVICTED its evicted_keys count then, FENCE the topic's end
// offsets taken after the loss was seen ("-" once the persister passed
// them, or when nothing was lost). A marker that is missing (the data
// went with it), that names another replication id (a failover, or a
// restart) or a lower eviction count than the node's (keys were evicted)
// means a loss since it was written: the gateway writes a new one with a
// new fence before it restores anything. A restore waits for the
// marker's fence, and sets a hash's ":loaded" only if the marker is still
// the one it waited for (hydrate scripts check it atomically).

// ErrMarkerMoved means a restore's marker changed while it ran (Redis
// lost data again): nothing was marked loaded; the restore starts over.
var ErrMarkerMoved = errors.New("redis lost data during the restore")

// ErrNotLoaded answers a write to a user's hash that is not loaded: Redis
// lost it, or never restored it from Postgres. Nothing was written; the
// gateway restores the hash and writes again. It is an ErrUnavailable:
// a caller that cannot restore answers as if Redis were down.
var ErrNotLoaded = fmt.Errorf("%w: the user's state is not loaded in redis", ErrUnavailable)

// ErrNotReplicated marks a write Redis took whose replicas did not confirm
// it in time (WaitReplicas): a failover may lose it, so the gateway treats
// it as a write Redis did not take.
var ErrNotReplicated = fmt.Errorf("%w: redis' replicas did not confirm the write", ErrUnavailable)

// Loss says what an incarnation marker says of the keys it covers.
type Loss int

// Losses.
const (
	// LossNone: nothing lost since the marker was written.
	LossNone Loss = iota
	// LossMissing: the marker is gone (restart without persistence,
	// FLUSHALL, FLUSHDB, or the marker itself evicted or deleted).
	LossMissing
	// LossFailover: the node's replication id changed (a replica took
	// over, or the node restarted).
	LossFailover
	// LossEviction: the node evicted keys since the marker was written.
	LossEviction
)

func (l Loss) String() string {
	return [...]string{"none", "missing", "failover", "eviction"}[l]
}

// NoFence is the fence of a marker with nothing to wait for.
const NoFence = "-"

// Incarnation is a decoded incarnation marker.
type Incarnation struct {
	Gen     int64
	ReplID  string
	Evicted int64
	// Fence is the fence to wait for (grouplag.Fence's encoding), NoFence
	// when there is none.
	Fence string
	raw   string
}

// Fenced reports whether restores under inc must wait for its fence.
func (inc Incarnation) Fenced() bool { return inc.Fence != NoFence }

func parseIncarnation(raw string) (Incarnation, error) {
	parts := strings.Split(raw, " ")
	if len(parts) != 4 {
		return Incarnation{}, fmt.Errorf("decoding an incarnation marker %q: want 4 fields", raw)
	}
	gen, err1 := strconv.ParseInt(parts[0], 10, 64)
	ev, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || gen <= 0 || parts[3] == "" {
		return Incarnation{}, fmt.Errorf("decoding an incarnation marker %q", raw)
	}
	return Incarnation{Gen: gen, ReplID: parts[1], Evicted: ev, Fence: parts[3], raw: raw}, nil
}

// luaNodeFacts reads what a marker is checked against: the node's
// replication id and eviction count.
const luaNodeFacts = `
local function nodefacts()
  local r = redis.call('INFO', 'replication')
  local s = redis.call('INFO', 'stats')
  return string.match(r, 'master_replid:(%w+)') or '', string.match(s, 'evicted_keys:(%d+)') or '0'
end
`

// markerCheckScript: KEYS[1] = the marker. Returns {marker ("" none),
// replication id, evicted_keys}.
var markerCheckScript = redis.NewScript(luaNodeFacts + `
local id, ev = nodefacts()
return {redis.call('GET', KEYS[1]) or '', id, ev}
`)

// markerRenewScript writes a new marker over the one the caller saw.
// KEYS[1] = the marker; ARGV = the marker seen ("" none), the new fence.
// Returns the marker now held (another writer's, when the seen one was
// replaced meanwhile).
var markerRenewScript = redis.NewScript(luaNodeFacts + `
local m = redis.call('GET', KEYS[1]) or ''
if m ~= ARGV[1] then return m end
local gen = 0
if m ~= '' then gen = tonumber(string.match(m, '^(%d+)')) or 0 end
local t = redis.call('TIME')
local g = math.max(gen + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
local id, ev = nodefacts()
local v = string.format('%.0f', g) .. ' ' .. id .. ' ' .. ev .. ' ' .. ARGV[2]
redis.call('SET', KEYS[1], v)
return v
`)

// markerSwapScript replaces the marker only if it is still the one seen.
// KEYS[1] = the marker; ARGV = seen, new. Returns 1 when replaced.
var markerSwapScript = redis.NewScript(`
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`)

// luaIntact is the check of hydrate scripts: the marker at key mk is still
// of generation gen (a decimal string).
const luaIntact = `
local function intact(mk, gen)
  local m = redis.call('GET', mk)
  return m and string.sub(m, 1, #gen + 1) == gen .. ' '
end
`

// markLoadedScript marks a hash restored. KEYS[1] = the hash, KEYS[2]
// (optional) = the incarnation marker the restore waited for; ARGV[1] =
// its generation. Returns 0, marking nothing, when the marker is no
// longer of that generation.
var markLoadedScript = redis.NewScript(luaIntact + `
if KEYS[2] and not intact(KEYS[2], ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], ':loaded', '1')
return 1
`)

// markLoaded marks hash restored under inc (the zero Incarnation checks
// no marker): ErrMarkerMoved when the marker moved meanwhile.
func (s *Store) markLoaded(ctx context.Context, hash string, inc Incarnation) error {
	keys, gen := []string{hash}, "0"
	if inc.Gen > 0 {
		keys, gen = append(keys, s.IncarnationKey(hash)), strconv.FormatInt(inc.Gen, 10)
	}
	n, err := markLoadedScript.Run(ctx, s.rdb, keys, gen).Int()
	if err != nil {
		return fmt.Errorf("%w: marking %s restored: %w", ErrUnavailable, hash, err)
	}
	if n == 0 {
		return fmt.Errorf("marking %s restored: %w", hash, ErrMarkerMoved)
	}
	return nil
}

// IncarnationKey is the marker covering key (any key of ours: its hash
// tag picks the slot in a cluster).
func (s *Store) IncarnationKey(key string) string {
	if _, cluster := s.rdb.(*redis.ClusterClient); !cluster {
		return s.prefix + "in"
	}
	return s.prefix + "in:{" + slotTag(keySlot(key)) + "}"
}

// CheckIncarnation reads the marker covering key and says whether Redis
// lost data since it was written.
func (s *Store) CheckIncarnation(ctx context.Context, key string) (Incarnation, Loss, error) {
	incs, losses, err := s.CheckIncarnations(ctx, []string{key})
	if err != nil {
		return Incarnation{}, LossNone, err
	}
	return incs[0], losses[0], nil
}

// CheckIncarnations is CheckIncarnation for many keys in one pipeline
// (one check per marker: in a cluster, per slot).
func (s *Store) CheckIncarnations(ctx context.Context, keys []string) ([]Incarnation, []Loss, error) {
	cmds := map[string]*redis.Cmd{}
	var order []string
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for _, k := range keys {
			mk := s.IncarnationKey(k)
			if _, ok := cmds[mk]; !ok {
				cmds[mk] = markerCheckScript.EvalSha(ctx, pipe, []string{mk})
				order = append(order, mk)
			}
		}
	}); err != nil {
		return nil, nil, fmt.Errorf("checking the incarnation markers: %w", err)
	}
	incs, losses := make([]Incarnation, len(keys)), make([]Loss, len(keys))
	for i, k := range keys {
		res, err := cmds[s.IncarnationKey(k)].StringSlice()
		if err == nil && len(res) != 3 {
			err = fmt.Errorf("%d answers", len(res))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: checking the incarnation marker: %w", ErrUnavailable, err)
		}
		incs[i], losses[i] = judgeIncarnation(res[0], res[1], res[2])
	}
	return incs, losses, nil
}

// judgeIncarnation decodes a marker and compares it with its node's
// replication id and eviction count.
func judgeIncarnation(raw, replID, evictedNow string) (Incarnation, Loss) {
	if raw == "" {
		return Incarnation{}, LossMissing
	}
	inc, err := parseIncarnation(raw)
	if err != nil {
		// Not a marker we wrote: as good as none.
		return Incarnation{raw: raw}, LossMissing
	}
	evicted, _ := strconv.ParseInt(evictedNow, 10, 64)
	switch {
	case inc.ReplID != replID:
		return inc, LossFailover
	case evicted != inc.Evicted:
		// Higher: keys were evicted; lower: the counters were reset
		// (CONFIG RESETSTAT), which hides evictions.
		return inc, LossEviction
	}
	return inc, LossNone
}

// RenewIncarnation writes a new marker over seen (the zero Incarnation
// when none was found) with fence (NoFence: nothing to wait for), and
// returns the marker Redis holds after it: the new one, or the one
// another gateway wrote meanwhile.
func (s *Store) RenewIncarnation(ctx context.Context, key string, seen Incarnation, fence string) (Incarnation, error) {
	raw, err := markerRenewScript.Run(ctx, s.rdb, []string{s.IncarnationKey(key)}, seen.raw, fence).Text()
	if err != nil {
		return Incarnation{}, fmt.Errorf("%w: renewing the incarnation marker: %w", ErrUnavailable, err)
	}
	return parseIncarnation(raw)
}

// ClearFence records that inc's fence is passed (restores stop waiting
// for it); a marker replaced meanwhile is left alone.
func (s *Store) ClearFence(ctx context.Context, key string, inc Incarnation) error {
	if !inc.Fenced() {
		return nil
	}
	cleared := fmt.Sprintf("%d %s %d %s", inc.Gen, inc.ReplID, inc.Evicted, NoFence)
	if err := markerSwapScript.Run(ctx, s.rdb, []string{s.IncarnationKey(key)}, inc.raw, cleared).Err(); err != nil {
		return fmt.Errorf("%w: clearing the incarnation marker's fence: %w", ErrUnavailable, err)
	}
	return nil
}

// slotTags[i] is a hash tag whose slot is i.
var (
	slotTagsOnce sync.Once
	slotTags     []string
)

// slotTag is a short hash tag of the cluster slot.
func slotTag(slot int) string {
	slotTagsOnce.Do(func() {
		slotTags = make([]string, clusterSlots)
		left := clusterSlots
		for i := 0; left > 0; i++ {
			tag := strconv.FormatInt(int64(i), 36)
			if sl := int(crc16(tag) % clusterSlots); slotTags[sl] == "" {
				slotTags[sl] = tag
				left--
			}
		}
	})
	return slotTags[slot]
}

// A write the gateway acknowledged while Redis could not take it (a
// degraded write: durable in Kafka only) leaves the user's hash behind
// what was acknowledged, though nothing was lost. Once Redis answers
// again the gateway unloads the hash and leaves a fence of the user's own
// (taken after the write was acknowledged): the next restore of the user
// waits for it as for the marker's.

// UserFenceTTL bounds how long a user's fence outlives its restore
// (the persister passes it within seconds).
const UserFenceTTL = time.Hour

// UserFenceKey holds the fence a user's next restore waits for.
func (s *Store) UserFenceKey(user string) string { return s.prefix + "uf:{" + user + "}" }

// SetUserFence leaves fence for the user's next restores (of cursors or
// of collected thread registers) to wait for.
func (s *Store) SetUserFence(ctx context.Context, user, fence string) error {
	if err := s.rdb.Set(ctx, s.UserFenceKey(user), fence, UserFenceTTL).Err(); err != nil {
		return fmt.Errorf("%w: fencing %s: %w", ErrUnavailable, user, err)
	}
	return nil
}

// UserFences lists, of users, those with a fence to wait for.
func (s *Store) UserFences(ctx context.Context, users []string) ([]string, error) {
	cmds := make([]*redis.StringCmd, len(users))
	if _, err := s.Exec(ctx, func(pipe redis.Pipeliner) {
		for i, u := range users {
			cmds[i] = pipe.Get(ctx, s.UserFenceKey(u))
		}
	}); err != nil {
		return nil, fmt.Errorf("reading the fences of %d users: %w", len(users), err)
	}
	var fenced []string
	for i, c := range cmds {
		if v, err := c.Result(); err == nil && v != "" {
			fenced = append(fenced, users[i])
		}
	}
	return fenced, nil
}

// UserFence is the fence a user's restore must wait for ("" none).
func (s *Store) UserFence(ctx context.Context, user string) (string, error) {
	v, err := s.rdb.Get(ctx, s.UserFenceKey(user)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: reading the fence of %s: %w", ErrUnavailable, user, err)
	}
	return v, nil
}

// ClearUserFence drops the user's fence if it is still fence.
func (s *Store) ClearUserFence(ctx context.Context, user, fence string) error {
	if err := markerSwapScript.Run(ctx, s.rdb, []string{s.UserFenceKey(user)}, fence, "").Err(); err != nil {
		return fmt.Errorf("%w: clearing the fence of %s: %w", ErrUnavailable, user, err)
	}
	return nil
}
