package seam

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/readstate/receipts/pkg/grouplag"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Restores: no answer below what the durable path holds.
//
// A write never acts on state Redis lost: the scripts of the user hashes
// refuse one that is not loaded (redisstore.ErrNotLoaded), and the gate
// restores it from Postgres first, then writes. A restore, and a read
// answered from Postgres, first settles what may be in flight between
// Kafka and Postgres: with Redis up, by the incarnation marker
// (redisstore/loss.go: a loss since it was written means a new fence,
// and every restore waits until the persister has passed it); with
// Redis away, by a fence of its own (the barrier's CatchUp). A restore
// that cannot settle within RestoreConfig.Timeout fails: a write is then
// answered as when Redis is down (durable, realtime_degraded), a read
// Unavailable; for RestoreConfig.Cooldown after such a failure restores
// fail at once instead of each waiting out the bound.

// Restore defaults.
const (
	// RestoreTimeoutDefault bounds a restore's wait for the persister: a
	// few of its windows (LingerMaxDefault 250 ms plus the write).
	RestoreTimeoutDefault = 5 * time.Second
	// RestoreCooldownDefault is how long restores fail fast after one
	// ran out of time (the persister or Kafka is down).
	RestoreCooldownDefault = time.Second
	// MaxRestoreChannels bounds the cursors of one user a restore reads.
	MaxRestoreChannels = 1_000_000
	RestorePage        = 10_000
	// restoreAttempts bounds the restores of one hash that lost its
	// marker again while it ran.
	restoreAttempts = 3
	// restoreParallel bounds the restores writes run beside their flushes.
	restoreParallel = 8
)

// RestoreConfig configures the restores after a Redis loss.
type RestoreConfig struct {
	// Barrier tells when the persister has written what was on the topic
	// (grouplag.Barrier on its group). Nil: restores never wait, which is
	// right only where nothing is in flight (tests without a persister).
	Barrier *grouplag.Barrier
	// Timeout bounds a restore's wait. Defaults to RestoreTimeoutDefault.
	Timeout time.Duration
	// Cooldown: after a restore ran out of time, restores fail at once
	// for this long. Defaults to RestoreCooldownDefault.
	Cooldown time.Duration
}

// RegisterFlags registers the restores' flags.
func (c *RestoreConfig) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.Timeout, c.Cooldown = d.Timeout, d.Cooldown
	fs.DurationVar(&c.Timeout, "restore-timeout", c.Timeout, "bound on a restore's wait for the persister after Redis lost data (then: writes realtime_degraded, reads Unavailable)")
	fs.DurationVar(&c.Cooldown, "restore-cooldown", c.Cooldown, "after a restore ran out of time, restores fail at once for this long")
}

func (c RestoreConfig) withDefaults() RestoreConfig {
	c.Timeout = cmp.Or(c.Timeout, RestoreTimeoutDefault)
	c.Cooldown = cmp.Or(c.Cooldown, RestoreCooldownDefault)
	return c
}

// errRestoreCooling is the failure of a restore during the cooldown.
var errRestoreCooling = errors.New("restores are failing: the persister did not catch up in time")

// Restorer puts back what Redis lost, once per hash at a time.
type Restorer struct {
	g       *Core
	cfg     RestoreConfig
	flights singleflight.Group
	// coolUntil is the Unix nanosecond until which restores fail fast.
	coolUntil atomic.Int64
	m         restoreMetrics

	// degraded are the users with writes acknowledged while Redis could
	// not take them: their hashes are unloaded (with a fence of their
	// own) before this gateway answers anything of them from Redis. Each
	// holds the number of its last note (from notes), so that a settle
	// whose fence came before a later note does not take that one too.
	degradedMu sync.Mutex
	degraded   map[string]uint64
	notes      uint64
	nDegraded  atomic.Int64
	// unconfirmed holds, per user, the writes in flight that Redis'
	// replicas have not confirmed, by ticket (unconfirmed.go); under
	// degradedMu.
	unconfirmed  map[string]map[uint64]*UnconfirmedWrite
	nUnconfirmed atomic.Int64
	ticket       atomic.Uint64
	// Slots bounds the restores writes run beside their flushes.
	Slots chan struct{}
}

type restoreMetrics struct {
	losses   *prometheus.CounterVec
	restores *prometheus.CounterVec
	wait     prometheus.Histogram
}

func newRestorer(g *Core, cfg RestoreConfig, reg prometheus.Registerer) *Restorer {
	f := promauto.With(reg)
	r := &Restorer{g: g, cfg: cfg.withDefaults(), degraded: map[string]uint64{}, unconfirmed: map[string]map[uint64]*UnconfirmedWrite{}, Slots: make(chan struct{}, restoreParallel), m: restoreMetrics{
		losses: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "redis_losses_total",
			Help: "Redis data losses this gateway found first (it wrote the new incarnation marker and fence), by what the marker said: missing (restart or FLUSHALL), failover, eviction.",
		}, []string{"loss"}),
		restores: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "restores_total",
			Help: "Hashes restored from Postgres before a write or a read, by state kind and outcome (ok, failed).",
		}, []string{"kind", "outcome"}),
		wait: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "restore_wait_seconds",
			Help:    "Time restores and Postgres reads waited for the persister to write what was in flight when Redis lost data (or was away).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}}
	for _, l := range []redisstore.Loss{redisstore.LossMissing, redisstore.LossFailover, redisstore.LossEviction} {
		r.m.losses.WithLabelValues(l.String())
	}
	for _, k := range []string{"cursors", "threads"} {
		r.m.restores.WithLabelValues(k, "ok")
		r.m.restores.WithLabelValues(k, "failed")
	}
	return r
}

// bounded is ctx bounded by the restore timeout, unless cooling down.
func (r *Restorer) bounded(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if time.Now().UnixNano() < r.coolUntil.Load() {
		return nil, nil, errRestoreCooling
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	return ctx, cancel, nil
}

// timedOut starts the cooldown after a wait that ran out of time.
func (r *Restorer) timedOut(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		r.coolUntil.Store(time.Now().Add(r.cfg.Cooldown).UnixNano())
	}
	return err
}

// Settle returns once Postgres holds everything acknowledged that Redis
// may have lost of keys (any keys of ours: their incarnation markers
// cover them), and each key's marker to restore under. With Redis away
// it waits for a fence of its own (zero Incarnations).
func (r *Restorer) Settle(ctx context.Context, keys ...string) ([]redisstore.Incarnation, error) {
	bctx, cancel, err := r.bounded(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	start := time.Now()
	incs, err := r.fence(bctx, keys)
	if errors.Is(err, redisstore.ErrUnavailable) {
		// Redis is away: the read answers from Postgres, once it holds
		// what was in flight when the read began.
		incs, err = make([]redisstore.Incarnation, len(keys)), nil
		if r.cfg.Barrier != nil {
			err = r.cfg.Barrier.CatchUp(bctx)
		}
	}
	if waited := time.Since(start); waited > time.Millisecond {
		r.m.wait.Observe(waited.Seconds())
	}
	if err != nil {
		return nil, r.timedOut(bctx, fmt.Errorf("settling what Redis may have lost: %w", err))
	}
	return incs, nil
}

// fence checks the keys' markers, writes a new one with a new fence where
// Redis lost data since, and waits for the markers' fences.
func (r *Restorer) fence(ctx context.Context, keys []string) ([]redisstore.Incarnation, error) {
	rs := r.g.Redis
	incs, losses, err := rs.CheckIncarnations(ctx, keys)
	if err != nil {
		return nil, err
	}
	renewed := map[string]redisstore.Incarnation{} // by marker key
	var fence string
	for i, loss := range losses {
		mk := rs.IncarnationKey(keys[i])
		if loss == redisstore.LossNone {
			continue
		}
		if inc, ok := renewed[mk]; ok {
			incs[i] = inc
			continue
		}
		if fence == "" {
			fence = redisstore.NoFence
			if r.cfg.Barrier != nil {
				// Taken after the loss was seen: everything acknowledged
				// before the loss is below it.
				f, err := r.cfg.Barrier.Mark(ctx)
				if err != nil {
					return nil, err
				}
				fence = f.String()
			}
		}
		inc, err := rs.RenewIncarnation(ctx, keys[i], incs[i], fence)
		if err != nil {
			return nil, err
		}
		incs[i], renewed[mk] = inc, inc
		r.m.losses.WithLabelValues(loss.String()).Inc()
		r.g.Log.Warn("redis lost data: restores wait for the persister to write what was in flight", zap.Stringer("loss", loss), zap.String("marker", mk), zap.String("fence", fence))
	}
	if r.cfg.Barrier == nil {
		return incs, nil
	}
	waited := map[string]bool{}
	for i, inc := range incs {
		if !inc.Fenced() || waited[inc.Fence] {
			continue
		}
		f, err := grouplag.ParseFence(inc.Fence)
		if err != nil {
			return nil, err
		}
		if err := r.cfg.Barrier.Wait(ctx, f); err != nil {
			return nil, err
		}
		waited[inc.Fence] = true
		// Others need not ask Kafka again; a failure here only costs them that.
		_ = rs.ClearFence(ctx, keys[i], inc)
	}
	return incs, nil
}

// Settled returns once Postgres holds what Redis may have lost of the
// users' and channels' keys: call it before a Postgres read whose answer
// goes to a caller or into Redis (restore.go).
func (g *Core) Settled(ctx context.Context, users, channels []string) error {
	keys := make([]string, 0, len(users)+len(channels))
	for _, u := range users {
		keys = append(keys, g.CursorStore().RedisKey(u))
	}
	for _, ch := range channels {
		keys = append(keys, g.HeadStore().RedisKey(ch))
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := g.Restore.Settle(ctx, keys...)
	return err
}

// shared runs fn once per name at a time: concurrent restores of one hash
// share one, each caller bounded by its own ctx.
func (r *Restorer) shared(ctx context.Context, name string, fn func(context.Context) error) error {
	ch := r.flights.DoChan(name, func() (any, error) {
		// Detached from the first caller, bounded by the restore timeout
		// in settle.
		return nil, fn(context.WithoutCancel(ctx))
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cursors restores the users' cursor hashes. One user is restored alone
// (concurrent restores of it share one); several, as a write's flush
// brings them, in one round trip per store: one marker check, one
// Postgres read, one pipeline of hydrates. A user with a fence of its own
// or more rows than one batch reads is restored alone. It returns the
// first failure (the others may have been restored).
func (r *Restorer) Cursors(ctx context.Context, users []string) error {
	users = slices.Compact(slices.Sorted(slices.Values(users)))
	if len(users) == 1 {
		return r.cursorsOfShared(ctx, users[0])
	}
	var err error
	for range restoreAttempts {
		var again []string
		if again, err = r.cursorsBatch(ctx, users); err != nil || len(again) == 0 {
			break
		}
		users = again
	}
	r.count("cursors", err)
	return err
}

// cursorsOfShared restores one user, sharing a restore already running.
func (r *Restorer) cursorsOfShared(ctx context.Context, user string) error {
	return r.shared(ctx, "u\x00"+user, func(c context.Context) error { return r.cursorsOf(c, user) })
}

// cursorsBatch restores users together; again are those whose marker
// moved meanwhile.
func (r *Restorer) cursorsBatch(ctx context.Context, users []string) (again []string, err error) {
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = r.g.CursorStore().RedisKey(u)
	}
	incs, err := r.Settle(ctx, keys...)
	if err != nil {
		return nil, err
	}
	fenced, err := r.g.Redis.UserFences(ctx, users)
	if err != nil {
		return nil, err
	}
	var alone []string
	if len(fenced) > 0 {
		alone = fenced
		users = slices.DeleteFunc(users, func(u string) bool { return slices.Contains(fenced, u) })
	}
	pctx, cancel := context.WithTimeout(ctx, r.g.Cfg.PostgresTimeout)
	rows, more, err := cursors.NewPostgres(r.g.PG).UsersStates(pctx, users, RestorePage)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("reading the cursors of %d users: %w", len(users), err)
	}
	if more {
		alone, users = append(alone, users...), nil
	}
	byUser := make(map[string][]receipt.State, len(users))
	incOf := make(map[string]redisstore.Incarnation, len(users))
	incByKey := make(map[string]redisstore.Incarnation, len(keys))
	for i, k := range keys {
		incByKey[k] = incs[i]
	}
	for _, u := range users {
		byUser[u] = nil
		incOf[u] = incByKey[r.g.CursorStore().RedisKey(u)]
	}
	for _, st := range rows {
		byUser[st.Key.User] = append(byUser[st.Key.User], st)
	}
	var first error
	if len(byUser) > 0 {
		res, err := r.g.CursorStore().HydrateMany(ctx, byUser, incOf)
		if err != nil {
			return nil, err
		}
		for u, err := range res {
			switch {
			case errors.Is(err, redisstore.ErrMarkerMoved):
				again = append(again, u)
			case err != nil:
				first = cmp.Or(first, err)
			}
		}
	}
	for _, u := range alone {
		first = cmp.Or(first, r.cursorsOfShared(ctx, u))
	}
	return again, first
}

func (r *Restorer) cursorsOf(ctx context.Context, user string) error {
	err := r.Restore(ctx, r.g.CursorStore().RedisKey(user), func(ctx context.Context, inc redisstore.Incarnation) error {
		fence, err := r.UserFence(ctx, user)
		if err != nil {
			return err
		}
		states, err := r.durableCursors(ctx, user)
		if err != nil {
			return err
		}
		if err := r.g.CursorStore().HydrateAfterFence(ctx, user, states, inc, fence); err != nil {
			return err
		}
		if fence != "" {
			_ = r.g.Redis.ClearUserFence(ctx, user, fence) // else the next restore waits for nothing new
		}
		return nil
	})
	r.count("cursors", err)
	return err
}

// UserFence waits for the fence a degraded write left on user (see
// noteDegraded) and returns it ("" none).
func (r *Restorer) UserFence(ctx context.Context, user string) (string, error) {
	fence, err := r.g.Redis.UserFence(ctx, user)
	if err != nil || fence == "" || fence == redisstore.NoFence || r.cfg.Barrier == nil {
		return fence, err
	}
	f, err := grouplag.ParseFence(fence)
	if err != nil {
		return "", err
	}
	bctx, cancel, err := r.bounded(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	if err := r.cfg.Barrier.Wait(bctx, f); err != nil {
		return "", r.timedOut(bctx, err)
	}
	return fence, nil
}

// FenceUser leaves a fence of now for the user's next restores: what the
// gateway wrote of the user is then in Postgres before a restore reads it.
func (r *Restorer) FenceUser(ctx context.Context, user string) error {
	if r.cfg.Barrier == nil {
		return nil
	}
	bctx, cancel, err := r.bounded(ctx)
	if err != nil {
		return err
	}
	f, err := r.cfg.Barrier.Mark(bctx)
	cancel()
	if err != nil {
		return err
	}
	return r.g.Redis.SetUserFence(ctx, user, f.String())
}

// NoteDegraded records users whose writes were acknowledged while Redis
// did not take them (durable in Kafka only): until settleDegraded has
// unloaded their hashes, Redis is behind what they were told.
func (r *Restorer) NoteDegraded(users []string) {
	if len(users) == 0 {
		return
	}
	r.degradedMu.Lock()
	r.notes++
	for _, u := range users {
		r.degraded[u] = r.notes
	}
	r.nDegraded.Store(int64(len(r.degraded)))
	r.degradedMu.Unlock()
}

// Replicated waits, when Config.ReplicaAcks asks for it, until Redis'
// replicas took what was written of the users' cursors, and reports per
// user whether they did not (lagging[i]): such a write is answered as a
// degraded one (the caller notes it), since a failover may lose it. Nil
// when nothing is waited for.
func (g *Core) Replicated(ctx context.Context, users []string) (lagging []bool) {
	if g.Cfg.ReplicaAcks <= 0 || len(users) == 0 {
		return nil
	}
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = g.CursorStore().RedisKey(u)
	}
	lagging, err := g.Redis.WaitReplicas(ctx, keys, g.Cfg.ReplicaAcks, g.Cfg.ReplicaAckTimeout)
	if err != nil {
		n := 0
		for _, l := range lagging {
			if l {
				n++
			}
		}
		g.RedisDegradedOn(ctx, RedisOpReplicate, n, err)
	}
	return lagging
}

// SettleDegraded unloads, with a fence taken now (after their writes were
// acknowledged), the hashes of those of users with degraded writes, so
// that they are restored, past their writes, before Redis answers of them.
// With replica acks it first waits for the users' earlier writes still
// waiting for their replicas (unconfirmed.go), and the unload counts only
// once the replicas took it: a failover to one without it would answer
// the hash Redis is behind on.
// It returns an error while it cannot: the caller answers without Redis.
func (r *Restorer) SettleDegraded(ctx context.Context, users []string) error {
	// An earlier write of these users still waiting for its replicas may
	// end degraded: it is noted first.
	if err := r.awaitConfirmed(ctx, users); err != nil {
		return err
	}
	return r.SettleDegradedNow(ctx, users)
}

// SettleDegradedNow is SettleDegraded without the wait for earlier
// unconfirmed writes (the marks' flush checks them before it answers).
func (r *Restorer) SettleDegradedNow(ctx context.Context, users []string) error {
	if r.nDegraded.Load() == 0 {
		return nil
	}
	r.degradedMu.Lock()
	var todo []string
	noted := map[string]uint64{}
	for _, u := range users {
		if n, ok := r.degraded[u]; ok {
			todo = append(todo, u)
			noted[u] = n
		}
	}
	r.degradedMu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	fence := redisstore.NoFence
	if r.cfg.Barrier != nil {
		bctx, cancel, err := r.bounded(ctx)
		if err != nil {
			return err
		}
		f, err := r.cfg.Barrier.Mark(bctx)
		cancel()
		if err != nil {
			return fmt.Errorf("fencing degraded writes: %w", err)
		}
		fence = f.String()
	}
	if err := r.g.CursorStore().UnloadUsers(ctx, todo, fence); err != nil {
		return err
	}
	settled, err := todo, error(nil)
	if lagging := r.g.Replicated(ctx, todo); lagging != nil {
		settled = nil
		for i, u := range todo {
			if !lagging[i] {
				settled = append(settled, u)
			} else {
				err = redisstore.ErrNotReplicated
			}
		}
	}
	r.degradedMu.Lock()
	for _, u := range settled {
		// A write noted since the fence was taken is not below it: the
		// user stays degraded, for a settle with a fence after it.
		if r.degraded[u] == noted[u] {
			delete(r.degraded, u)
		}
	}
	r.nDegraded.Store(int64(len(r.degraded)))
	r.degradedMu.Unlock()
	return err
}

// Restore settles key's marker, then runs load under it, again when the
// marker moved meanwhile (Redis lost data during the restore).
func (r *Restorer) Restore(ctx context.Context, key string, load func(context.Context, redisstore.Incarnation) error) error {
	var err error
	for range restoreAttempts {
		incs, err := r.Settle(ctx, key)
		if err != nil {
			return err
		}
		if err = load(ctx, incs[0]); !errors.Is(err, redisstore.ErrMarkerMoved) {
			return err
		}
	}
	return err
}

func (r *Restorer) count(kind string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	r.m.restores.WithLabelValues(kind, outcome).Inc()
}

// durableCursors reads every cursor of user from Postgres, in pages.
func (r *Restorer) durableCursors(ctx context.Context, user string) ([]receipt.State, error) {
	var all []receipt.State
	after := ""
	for {
		pctx, cancel := context.WithTimeout(ctx, r.g.Cfg.PostgresTimeout)
		page, err := cursors.NewPostgres(r.g.PG).UserStatesAfter(pctx, user, after, RestorePage)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading the cursors of %s: %w", user, err)
		}
		all = append(all, page...)
		if len(page) < RestorePage {
			return all, nil
		}
		if len(all) >= MaxRestoreChannels {
			return nil, fmt.Errorf("restoring the cursors of %s: more than %d channels", user, MaxRestoreChannels)
		}
		after = page[len(page)-1].Key.Channel
	}
}

// RestoreUserHash restores one of a user's hashes that Redis lost (what
// is kept under redisKey, counted as kind), once at a time per key: hydrate
// writes it from Postgres under the incarnation it is given.
func (g *Core) RestoreUserHash(ctx context.Context, key, redisKey, kind string, hydrate func(ctx context.Context, inc redisstore.Incarnation) error) error {
	r := g.Restore
	return r.shared(ctx, key, func(ctx context.Context) error {
		err := r.Restore(ctx, redisKey, hydrate)
		r.count(kind, err)
		return err
	})
}
