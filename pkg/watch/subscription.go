package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// Subscription is one watch stream's state on this replica. Next is
// called by one goroutine (the stream's handler); the reader only merges
// into it under its lock, so a slow stream never holds up the others.
type Subscription struct {
	hub      *Hub
	client   string // "" for an unnamed caller (no per-client bound)
	channels []string
	notify   chan struct{} // cap 1: pending has something
	opening  *receiptsv1.WatchEvent
	lastSent time.Time
	// lastToken is the resume token of the last event Next returned.
	lastToken string
	close     sync.Once

	mu sync.Mutex
	// merged is, per channel, the greatest stream id merged into pending
	// or sent: the reader's entries at or below it are not offered again.
	merged map[string]streamID
	// pending holds the unsent updates, one per (channel, thread root,
	// user, kind) (a channel cursor's root is 0, a thread head's user
	// and kind are empty), each the highest position seen, at most
	// MaxPending of them.
	pending map[updateKey]*pendingUpdate
	// overflow says pending passed MaxPending and was emptied: the next
	// event is a snapshot marked expired.
	overflow bool
}

type updateKey struct {
	channel string
	root    int64
	user    string
	kind    receiptsv1.Kind
}

// pendingUpdate is one key's unsent state: the highest position of the
// moves after its latest removal, or a removal when that is the latest
// entry. Cursors only move forward, so the order of the moves does not
// matter; a removal's does (by stream id): moves before it are forgotten
// (in id order, as the reader offers them; a catch-up's older move that
// arrives after a newer removal is ignored).
type pendingUpdate struct {
	id     streamID // the greatest entry id merged
	pos    position
	atUnix int64
	// moved and cut are the ids of the latest move and the latest
	// removal merged: removed when cut is the later.
	moved, cut streamID
}

func (p *pendingUpdate) removed() bool { return p.cut.compare(p.moved) > 0 }

// merge folds one entry of the key into p.
func (p *pendingUpdate) merge(e entry) {
	if e.id.compare(p.id) > 0 {
		p.id = e.id
	}
	if e.removed {
		if e.id.compare(p.cut) > 0 {
			p.cut = e.id
		}
		if e.id.compare(p.moved) > 0 {
			p.pos, p.atUnix = position{}, e.atUnix
		}
		return
	}
	if e.id.compare(p.cut) < 0 {
		return // a move from before the latest removal
	}
	if p.removed() || e.pos.compare(p.pos) > 0 {
		p.pos, p.atUnix = e.pos, e.atUnix
	}
	if e.id.compare(p.moved) > 0 {
		p.moved = e.id
	}
}

// Subscribe opens a subscription to channels (at most MaxChannels),
// resuming after token when it is not empty. The first event Next returns
// is then, as the case may be: a snapshot of every channel (no token);
// resume_token_expired with a snapshot of the channels whose entries after
// the token were trimmed (and of any channel the token does not name); or
// the updates after the token. A token that is not one of ours fails with
// ErrBadToken.
func (h *Hub) Subscribe(ctx context.Context, channels []string, resumeToken string) (*Subscription, error) {
	return h.SubscribeAs(ctx, "", channels, resumeToken)
}

// SubscribeAs is Subscribe for a named client (an API caller: its token
// name, or its address on an open API), of whom at most
// MaxStreamsPerClient streams are open at once on this replica: past it
// the call fails with ErrTooManyClientStreams. An empty client is not
// bounded (beyond MaxSubscribers).
func (h *Hub) SubscribeAs(ctx context.Context, client string, channels []string, resumeToken string) (*Subscription, error) {
	chs, err := h.normalizeChannels(channels)
	if err != nil {
		return nil, err
	}
	tok, err := decodeToken(resumeToken)
	if err != nil {
		return nil, err
	}
	if !h.running.Load() {
		return nil, ErrNotRunning
	}
	from := map[string]streamID{}
	for _, ch := range chs {
		if id, ok := tok.lookup(ch); ok {
			from[ch] = id
		}
	}
	needsSnapshot := func(ch string) bool { _, ok := from[ch]; return !ok }
	probes, err := probeChannels(ctx, h.cfg.Redis, h.cfg.Keys, chs, h.snapshotMembers(), needsSnapshot)
	if err != nil {
		return nil, err
	}
	var expired []string
	for _, ch := range chs {
		id, ok := from[ch]
		if !ok {
			continue
		}
		if probes[ch].expired(id) {
			expired = append(expired, ch)
			delete(from, ch)
		}
	}
	if len(expired) > 0 {
		again, err := probeChannels(ctx, h.cfg.Redis, h.cfg.Keys, expired, h.snapshotMembers(), func(string) bool { return true })
		if err != nil {
			return nil, err
		}
		for ch, pr := range again {
			probes[ch] = pr
		}
	}

	s := &Subscription{
		hub: h, client: client, channels: chs, notify: make(chan struct{}, 1),
		merged: make(map[string]streamID, len(chs)), pending: map[updateKey]*pendingUpdate{},
	}
	var snapChannels []string
	for _, ch := range chs {
		if id, ok := from[ch]; ok {
			s.merged[ch] = id
			continue
		}
		s.merged[ch] = probes[ch].last
		snapChannels = append(snapChannels, ch)
	}
	if len(snapChannels) > 0 {
		snapshot, err := h.snapshot(ctx, snapChannels, probes)
		if err != nil {
			return nil, err
		}
		reason := "fresh"
		if len(expired) > 0 {
			reason = "expired"
		}
		h.m.snapshots.WithLabelValues(reason).Inc()
		s.opening = &receiptsv1.WatchEvent{
			ResumeToken: encodeToken(s.merged), Snapshot: snapshot, ResumeTokenExpired: len(expired) > 0,
		}
	}

	if s.opening == nil {
		s.lastToken = resumeToken
	}
	// The catch-up of a channel starts from the cursor s registered with,
	// never from s.merged: once registered, the reader may offer s entries
	// past upTo before the catch-up runs, moving s.merged past the range
	// the catch-up must read — which would then be skipped, a gap.
	start := maps(s.merged)
	catchUp, err := h.register(s, start)
	if err != nil {
		return nil, err
	}
	if h.afterRegister != nil {
		h.afterRegister(s)
	}
	for _, ch := range chs {
		upTo, ok := catchUp[ch]
		if !ok {
			continue
		}
		if err := s.catchUp(ctx, ch, start[ch], upTo); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func maps(m map[string]streamID) map[string]streamID {
	out := make(map[string]streamID, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// catchUp reads the entries in (after, upTo] that the reader had already
// dispatched before s registered, and merges them.
func (s *Subscription) catchUp(ctx context.Context, ch string, after, upTo streamID) error {
	key := s.hub.cfg.Keys.StreamKey(ch)
	for {
		msgs, err := s.hub.cfg.Redis.XRangeN(ctx, key, after.after(), upTo.String(), s.hub.cfg.CatchUpPage).Result()
		if err != nil {
			return fmt.Errorf("resuming channel %q: %w", ch, err)
		}
		if len(msgs) == 0 {
			return nil
		}
		entries := make([]entry, 0, len(msgs))
		for _, m := range msgs {
			if e, ok := parseEntry(m); ok {
				entries = append(entries, e)
			}
			if id, err := parseStreamID(m.ID); err == nil {
				after = id
			}
		}
		s.offer(ch, entries, after)
		if int64(len(msgs)) < s.hub.cfg.CatchUpPage || after.compare(upTo) >= 0 {
			return nil
		}
	}
}

// offer merges a channel's entries into pending. From the reader (upTo
// zero) only entries after merged count; a catch-up (upTo its range's end)
// merges its whole range, which lies below what the reader may already
// have offered.
func (s *Subscription) offer(ch string, entries []entry, upTo streamID) {
	s.mu.Lock()
	merged := s.merged[ch]
	catchUp := upTo != (streamID{})
	n := 0
	for _, e := range entries {
		if !catchUp && e.id.compare(merged) <= 0 {
			continue
		}
		if e.id.compare(merged) > 0 {
			merged = e.id
		}
		k := updateKey{ch, e.root, e.user, e.kind}
		p, ok := s.pending[k]
		if !ok {
			if len(s.pending) >= s.hub.cfg.MaxPending {
				// Too far behind to keep every key: forget them all and
				// send a snapshot instead, which covers every entry up to
				// its own ids.
				if !s.overflow {
					s.hub.m.overflows.Inc()
				}
				s.overflow = true
				s.pending = map[updateKey]*pendingUpdate{}
			}
			p = &pendingUpdate{}
			p.merge(e)
			s.pending[k] = p
			n++
			continue
		}
		s.hub.m.coalesced.Inc()
		p.merge(e)
		n++
	}
	if catchUp && upTo.compare(merged) > 0 {
		merged = upTo
	}
	s.merged[ch] = merged
	s.mu.Unlock()
	if n > 0 {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// Next returns the stream's next event: the opening snapshot, then the
// pending updates at most once per Coalesce window, or a snapshot marked
// expired after an overflow. It waits until there is one, ctx ends
// (ctx.Err(), nothing lost: call again) or the hub stops (ErrClosed).
func (s *Subscription) Next(ctx context.Context) (*receiptsv1.WatchEvent, error) {
	if ev := s.opening; ev != nil {
		s.opening = nil
		s.lastSent, s.lastToken = time.Now(), ev.GetResumeToken()
		return ev, nil
	}
	for {
		if d := time.Until(s.lastSent.Add(s.hub.cfg.Coalesce)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-s.hub.stopped:
				t.Stop()
				return nil, ErrClosed
			case <-t.C:
			}
		}
		s.mu.Lock()
		if s.overflow {
			s.overflow = false
			s.mu.Unlock()
			ev, err := s.resync(ctx)
			if err != nil {
				s.mu.Lock()
				s.overflow = true
				s.mu.Unlock()
				return nil, err
			}
			s.lastSent, s.lastToken = time.Now(), ev.GetResumeToken()
			return ev, nil
		}
		if len(s.pending) > 0 {
			ev := s.flushLocked()
			s.mu.Unlock()
			s.lastSent, s.lastToken = time.Now(), ev.GetResumeToken()
			s.hub.m.delivered.Add(float64(len(ev.Updates) + len(ev.ThreadHeads)))
			return ev, nil
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.hub.stopped:
			return nil, ErrClosed
		}
	}
}

// flushLocked turns pending into an event whose token covers everything
// merged (all of it is in this event or an earlier one).
func (s *Subscription) flushLocked() *receiptsv1.WatchEvent {
	ev := &receiptsv1.WatchEvent{Updates: make([]*receiptsv1.CursorUpdate, 0, len(s.pending))}
	for k, p := range s.pending {
		if k.root != 0 && k.user == "" {
			ev.ThreadHeads = append(ev.ThreadHeads, &receiptsv1.ThreadHeadUpdate{ChannelId: k.channel, RootSeq: k.root,
				Head: &receiptsv1.Position{Epoch: p.pos.epoch, Seq: p.pos.seq}, AtUnixMs: p.atUnix})
			continue
		}
		u := &receiptsv1.CursorUpdate{ChannelId: k.channel, UserId: k.user, Kind: k.kind, AtUnixMs: p.atUnix, ThreadRootSeq: k.root}
		if p.removed() {
			u.Removed = true
		} else {
			u.Position = &receiptsv1.Position{Epoch: p.pos.epoch, Seq: p.pos.seq}
		}
		ev.Updates = append(ev.Updates, u)
	}
	slices.SortFunc(ev.Updates, compareUpdates)
	slices.SortFunc(ev.ThreadHeads, func(a, b *receiptsv1.ThreadHeadUpdate) int {
		if a.ChannelId != b.ChannelId {
			return strings.Compare(a.ChannelId, b.ChannelId)
		}
		return cmp.Compare(a.RootSeq, b.RootSeq)
	})
	s.pending = map[updateKey]*pendingUpdate{}
	ev.ResumeToken = encodeToken(s.merged)
	return ev
}

func compareUpdates(a, b *receiptsv1.CursorUpdate) int {
	switch {
	case a.ChannelId != b.ChannelId:
		if a.ChannelId < b.ChannelId {
			return -1
		}
		return 1
	case a.ThreadRootSeq != b.ThreadRootSeq:
		return cmp.Compare(a.ThreadRootSeq, b.ThreadRootSeq)
	case a.UserId != b.UserId:
		if a.UserId < b.UserId {
			return -1
		}
		return 1
	}
	return int(a.Kind) - int(b.Kind)
}

// resync answers an overflow: a snapshot of every channel; what pending
// gathered meanwhile stays when it is newer than the snapshot. The token
// is the snapshot's ids (every entry up to them is in the snapshot).
func (s *Subscription) resync(ctx context.Context) (*receiptsv1.WatchEvent, error) {
	probes, err := probeChannels(ctx, s.hub.cfg.Redis, s.hub.cfg.Keys, s.channels, s.hub.snapshotMembers(), func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	snapshot, err := s.hub.snapshot(ctx, s.channels, probes)
	if err != nil {
		return nil, err
	}
	s.hub.m.snapshots.WithLabelValues("overflow").Inc()
	ev := &receiptsv1.WatchEvent{ResumeTokenExpired: true, Snapshot: snapshot}
	s.mu.Lock()
	defer s.mu.Unlock()
	delivered := make(map[string]streamID, len(s.channels))
	for _, ch := range s.channels {
		pr := probes[ch]
		delivered[ch] = pr.last
		if pr.last.compare(s.merged[ch]) > 0 {
			s.merged[ch] = pr.last
		}
	}
	for k, p := range s.pending {
		if p.id.compare(delivered[k.channel]) <= 0 {
			delete(s.pending, k)
		}
	}
	ev.ResumeToken = encodeToken(delivered)
	return ev, nil
}

// Heartbeat is the event a transport sends after a pause without one: no
// updates and no snapshot, the resume token of the last event Next
// returned. Writing it proves the client still reads (a stream whose
// client stops reading is dropped when a write misses its deadline). Call
// it from the goroutine that calls Next.
func (s *Subscription) Heartbeat() *receiptsv1.WatchEvent {
	return &receiptsv1.WatchEvent{ResumeToken: s.lastToken}
}

// Channels returns the subscription's channels, sorted.
func (s *Subscription) Channels() []string { return slices.Clone(s.channels) }

// Close ends the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.close.Do(func() { s.hub.unregister(s) })
}

// TicksFunc answers one channel's ticks as the read API does (the
// gateway's GetTicks: head, watermarks, member count, whether the channel
// is small).
type TicksFunc func(ctx context.Context, channel string) (*receiptsv1.ChannelTicks, error)

// snapshotParallel bounds the concurrent TicksFunc calls of one snapshot.
const snapshotParallel = 8

// SetTicks completes every snapshot (fresh, expired, overflow) with fn's
// answer for each channel: the head, delivered_to_all_up_to,
// read_by_all_up_to, member_count and detailed, so that a reconnecting
// sender repaints every tick from it. The members' cursors stay the
// channel view's, read atomically with the stream position the snapshot's
// resume token names, and only for a small channel (detailed; a large
// one's ticks are its watermarks). fn runs after that read, so what it
// answers is at least as new: updates after the token that it already
// reflects come again as updates, harmless high-water marks. Without it a
// snapshot holds only the members' cursors.
func (h *Hub) SetTicks(fn TicksFunc) {
	if fn == nil {
		h.ticks.Store(nil)
		return
	}
	h.ticks.Store(&fn)
}

// SetSnapshotMembers sets the largest channel (in members) whose snapshot
// lists the members' cursors (the gateway's detail threshold); n ≤ 0
// keeps Config.SnapshotMembers.
func (h *Hub) SetSnapshotMembers(n int) {
	if n > 0 {
		h.maxSnapshot.Store(int64(n))
	}
}

func (h *Hub) snapshotMembers() int {
	if n := h.maxSnapshot.Load(); n > 0 {
		return int(n)
	}
	return h.cfg.SnapshotMembers
}

// snapshot builds the snapshot of channels (in that order) from the
// probes' cursors, completed by the ticks function when set.
func (h *Hub) snapshot(ctx context.Context, channels []string, probes map[string]probe) ([]*receiptsv1.ChannelTicks, error) {
	out := make([]*receiptsv1.ChannelTicks, len(channels))
	for i, ch := range channels {
		out[i] = probes[ch].ticks
	}
	fn := h.ticks.Load()
	if fn == nil {
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, snapshotParallel)
	)
	for i, ch := range channels {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t, err := (*fn)(ctx, ch)
			if err == nil && t == nil {
				err = errors.New("no answer")
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("reading the ticks of %q for a snapshot: %w", ch, err)
					cancel()
				}
				mu.Unlock()
				return
			}
			snap := out[i]
			// Detailed only when both say so: the probe read the members'
			// cursors (not a large view) and the ticks count few members.
			snap.Head, snap.MemberCount, snap.Detailed = t.GetHead(), t.GetMemberCount(), snap.Detailed && t.GetDetailed()
			snap.DeliveredToAllUpTo, snap.ReadByAllUpTo = t.GetDeliveredToAllUpTo(), t.GetReadByAllUpTo()
			if !snap.Detailed {
				snap.Members = nil
			}
		})
	}
	wg.Wait()
	return out, firstErr
}
