package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Errors a subscription can end or be refused with.
var (
	// ErrClosed means the hub stopped (the replica is shutting down).
	ErrClosed = errors.New("watch hub stopped")
	// ErrTooManySubscribers means the replica is at MaxSubscribers.
	ErrTooManySubscribers = errors.New("too many watch subscribers on this replica")
	// ErrTooManyClientStreams means the client is at MaxStreamsPerClient
	// on this replica.
	ErrTooManyClientStreams = errors.New("too many watch streams of this client on this replica")
	// ErrTooManyChannels means a subscription names more than MaxChannels.
	ErrTooManyChannels = errors.New("too many channels")
	// ErrNoChannels means a subscription names none.
	ErrNoChannels = errors.New("no channel to watch")
	// ErrNotRunning means the reader is not running (yet).
	ErrNotRunning = errors.New("watch reader not running")
)

// Hub is one replica's reader of the channel streams and its subscribers.
type Hub struct {
	cfg     Config
	log     *zap.Logger
	m       *metrics
	cluster bool

	mu        sync.Mutex
	watched   map[string]*watchedChannel
	subs      int
	perClient map[string]int // streams of each named client
	gen       uint64
	changed   chan struct{} // cap 1: the watched set went from empty to not
	stopped   chan struct{}
	running   atomic.Bool
	lastRead  atomic.Pointer[readStatus]
	// maxSnapshot, when set (SetSnapshotMembers), overrides
	// Config.SnapshotMembers.
	maxSnapshot atomic.Int64
	// ticks, when set (SetTicks), answers the snapshots.
	ticks atomic.Pointer[TicksFunc]
	// afterRegister, set by tests only, runs in Subscribe between the
	// registration and the catch-up (where the reader may already offer
	// the new subscription entries).
	afterRegister func(*Subscription)
}

// watchedChannel is a channel some local subscriber watches: the id the
// reader has read up to, and who to hand its entries to.
type watchedChannel struct {
	pos  streamID
	gen  uint64 // changes when the channel is dropped and watched again
	subs map[*Subscription]struct{}
}

type readStatus struct{ err error }

// New validates cfg (all problems at once). It starts nothing: Run reads.
func New(cfg Config) (*Hub, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring watch: %w", err)
	}
	_, cluster := cfg.Redis.(*redis.ClusterClient)
	return &Hub{
		cfg:       cfg,
		log:       cfg.Logger.Named("watch"),
		m:         newMetrics(cfg.Registerer),
		cluster:   cluster,
		watched:   map[string]*watchedChannel{},
		perClient: map[string]int{},
		changed:   make(chan struct{}, 1),
		stopped:   make(chan struct{}),
	}, nil
}

// Run reads the watched channels' streams until ctx ends, then ends every
// subscription with ErrClosed (the lifecycle contract). Redis failures are
// retried; subscribers then see nothing until it answers again, and go on
// from where the reader stopped.
func (h *Hub) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return errors.New("watch hub already running")
	}
	defer close(h.stopped)
	defer h.running.Store(false)
	pause := time.NewTimer(0)
	<-pause.C
	wait := func(d time.Duration) {
		pause.Reset(d)
		select {
		case <-ctx.Done():
			pause.Stop()
		case <-pause.C:
		}
	}
	// The first failure of an outage is logged, then every 50th after it: the
	// metric counts each.
	failures, warnings := 0, &rate.Sometimes{First: 1, Every: 50}
	for ctx.Err() == nil {
		plan := h.plan()
		if len(plan.channels) == 0 {
			select {
			case <-ctx.Done():
			case <-h.changed:
			}
			continue
		}
		got, err := h.read(ctx, plan)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			h.m.readErrors.Inc()
			h.lastRead.Store(&readStatus{err})
			warnings.Do(func() {
				h.log.Warn("reading the channel streams", zap.Int("failures", failures), zap.Error(err))
			})
			wait(min(time.Duration(failures)*100*time.Millisecond, 2*time.Second))
			continue
		}
		if failures > 0 {
			failures, warnings = 0, &rate.Sometimes{First: 1, Every: 50}
		}
		h.lastRead.Store(&readStatus{})
		h.dispatch(plan, got)
		if h.cluster && len(got) == 0 {
			wait(h.cfg.ClusterPoll)
		}
	}
	return nil
}

// Ready reports whether the reader runs. A failing Redis does not make it
// unready: the gateway stays ready for marks while Redis is down (see
// gate.Ready), and Status says why the streams are quiet.
func (h *Hub) Ready(context.Context) error {
	if !h.running.Load() {
		return ErrNotRunning
	}
	return nil
}

// Status says whether the last read of the channel streams failed (the
// lifecycle Describer, shown by /readyz).
func (h *Hub) Status() string {
	if st := h.lastRead.Load(); st != nil && st.err != nil {
		return "reading channel streams: " + st.err.Error()
	}
	return "reading channel streams"
}

// readPlan is one round: each watched channel with the id to read after
// and its generation.
type readPlan struct {
	channels []string
	ids      []streamID
	gens     []uint64
}

func (h *Hub) plan() readPlan {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := readPlan{channels: make([]string, 0, len(h.watched))}
	for ch := range h.watched {
		p.channels = append(p.channels, ch)
	}
	slices.Sort(p.channels)
	p.ids, p.gens = make([]streamID, len(p.channels)), make([]uint64, len(p.channels))
	for i, ch := range p.channels {
		w := h.watched[ch]
		p.ids[i], p.gens[i] = w.pos, w.gen
	}
	return p
}

// read runs one round of XREAD over the plan: one blocking call on a single
// node; in a cluster one non-blocking call per slot, pipelined per node
// (a blocking XREAD cannot span slots, and blocking calls in one pipeline
// would wait one after another).
func (h *Hub) read(ctx context.Context, p readPlan) (map[string][]redis.XMessage, error) {
	// XREAD answers by stream key: each names its channel here.
	channelOf := make(map[string]string, len(p.channels))
	args := func(idx []int) []string {
		s := make([]string, 0, 2*len(idx))
		for _, i := range idx {
			k := h.cfg.Keys.StreamKey(p.channels[i])
			channelOf[k] = p.channels[i]
			s = append(s, k)
		}
		for _, i := range idx {
			s = append(s, p.ids[i].String())
		}
		return s
	}
	out := map[string][]redis.XMessage{}
	collect := func(res []redis.XStream) {
		for _, st := range res {
			if len(st.Messages) > 0 {
				out[channelOf[st.Stream]] = st.Messages
			}
		}
	}
	if !h.cluster {
		all := make([]int, len(p.channels))
		for i := range all {
			all[i] = i
		}
		res, err := h.cfg.Redis.XRead(ctx, &redis.XReadArgs{Streams: args(all), Count: h.cfg.ReadCount, Block: h.cfg.Block}).Result()
		if errors.Is(err, redis.Nil) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		collect(res)
		return out, nil
	}
	bySlot := map[uint16][]int{}
	for i, ch := range p.channels {
		s := slot(h.cfg.Keys.StreamKey(ch))
		bySlot[s] = append(bySlot[s], i)
	}
	cmds := make([]*redis.XStreamSliceCmd, 0, len(bySlot))
	_, err := h.cfg.Redis.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, idx := range bySlot {
			cmds = append(cmds, pipe.XRead(ctx, &redis.XReadArgs{Streams: args(idx), Count: h.cfg.ReadCount, Block: -1}))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for _, c := range cmds {
		res, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		collect(res)
	}
	return out, nil
}

// dispatch hands each channel's new entries to its subscribers (never
// blocking: a subscriber only merges them into its bounded pending set)
// and moves the reader's position. A channel dropped and watched again
// while the round was in flight is skipped: its new position may be
// behind the round's.
func (h *Hub) dispatch(p readPlan, got map[string][]redis.XMessage) {
	if len(got) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, ch := range p.channels {
		msgs := got[ch]
		w := h.watched[ch]
		if len(msgs) == 0 || w == nil || w.gen != p.gens[i] {
			continue
		}
		entries := make([]entry, 0, len(msgs))
		last := w.pos
		for _, m := range msgs {
			id, err := parseStreamID(m.ID)
			if err != nil || id.compare(last) <= 0 {
				continue
			}
			last = id
			if e, ok := parseEntry(m); ok {
				entries = append(entries, e)
			}
		}
		h.m.entries.Add(float64(len(msgs)))
		w.pos = last
		if len(entries) == 0 {
			continue
		}
		for s := range w.subs {
			s.offer(ch, entries, streamID{})
		}
	}
}

// register adds s to its channels and returns, per channel, the reader's
// position when it is ahead of s's cursor: the range s must read itself.
func (h *Hub) register(s *Subscription, cursor map[string]streamID) (map[string]streamID, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running.Load() {
		return nil, ErrNotRunning
	}
	if h.subs >= h.cfg.MaxSubscribers {
		return nil, ErrTooManySubscribers
	}
	if s.client != "" {
		if h.perClient[s.client] >= h.cfg.MaxStreamsPerClient {
			h.m.clientRefusals.Inc()
			return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyClientStreams, h.perClient[s.client], h.cfg.MaxStreamsPerClient)
		}
		h.perClient[s.client]++
	}
	h.subs++
	h.m.subscribers.Set(float64(h.subs))
	wasEmpty := len(h.watched) == 0
	catchUp := map[string]streamID{}
	for ch, c := range cursor {
		w := h.watched[ch]
		if w == nil {
			h.gen++
			w = &watchedChannel{pos: c, gen: h.gen, subs: map[*Subscription]struct{}{}}
			h.watched[ch] = w
		} else if w.pos.compare(c) > 0 {
			catchUp[ch] = w.pos
		}
		w.subs[s] = struct{}{}
	}
	h.m.channels.Set(float64(len(h.watched)))
	if wasEmpty && len(h.watched) > 0 {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	return catchUp, nil
}

func (h *Hub) unregister(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range s.channels {
		if w := h.watched[ch]; w != nil {
			delete(w.subs, s)
			if len(w.subs) == 0 {
				delete(h.watched, ch)
			}
		}
	}
	if s.client != "" {
		if h.perClient[s.client]--; h.perClient[s.client] <= 0 {
			delete(h.perClient, s.client)
		}
	}
	h.subs--
	h.m.subscribers.Set(float64(h.subs))
	h.m.channels.Set(float64(len(h.watched)))
}

// normalizeChannels sorts and dedupes a subscription's channels.
func (h *Hub) normalizeChannels(channels []string) ([]string, error) {
	out := slices.Clone(channels)
	slices.Sort(out)
	out = slices.Compact(out)
	switch {
	case len(out) == 0:
		return nil, ErrNoChannels
	case len(out) > h.cfg.MaxChannels:
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyChannels, len(out), h.cfg.MaxChannels)
	}
	for _, ch := range out {
		if ch == "" || strings.ContainsAny(ch, "{}") {
			return nil, fmt.Errorf("bad channel id %q", ch)
		}
	}
	return out, nil
}

// slot is the Redis Cluster hash slot of key (CRC16/XMODEM of its hash
// tag, mod 16384).
func slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
