package gate

import (
	"context"
	"math"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds/fullyread"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
)

// The fully-read marker's calls (pkg/kinds/fullyread): SetFullyRead, and
// the marker in GetReadState's and ListThreads' answers (seam.Parts).

func init() {
	partsOf = append(partsOf, func(g *Gate) {
		g.Parts.ReadState = append(g.Parts.ReadState, g.fullyReadOfChannels)
		g.Parts.Threads = append(g.Parts.Threads, g.fullyReadOfThreads)
	})
}

// SetFullyRead implements receiptsv1connect.ReceiptServiceHandler. The
// marker is merged in Redis first (the greater one wins), then made
// durable; without Redis the call is refused with Retry-After, as a
// marker acknowledged but missing from the real-time view would read as
// going back.
func (g *Gate) SetFullyRead(ctx context.Context, req *connect.Request[receiptsv1.SetFullyReadRequest]) (*connect.Response[receiptsv1.SetFullyReadResponse], error) {
	r := req.Msg
	k, err := seam.ValidateKey(r.GetUserId(), r.GetChannelId())
	if err != nil {
		return nil, err
	}
	m := fullyread.Marker{Ref: fullyread.Ref{Key: k, Root: r.GetThreadRootSeq()}, Seq: r.GetSeq(), MessageID: r.GetMessageId(), UpdatedAtUnixMs: g.NowMs()}
	if err := m.Validate(); err != nil {
		return nil, seam.Invalid(apierr.InvalidField, err)
	}
	largest := m
	largest.UpdatedAtUnixMs = math.MaxInt64
	changed, complete := false, false
	w, err := seam.WriteUser(ctx, g.Core, seam.UserWrite[fullyread.Marker]{
		User: k.User, Largest: largest,
		Encode: func(m fullyread.Marker) (*kgo.Record, error) { return kind.Record(fullyread.Spec, m) },
		Change: func(ctx context.Context) (fullyread.Marker, int64, error, error) {
			res := g.fullyReadStore().Set(ctx, m)
			changed, complete = res.Changed, res.Complete
			return res.Marker, seam.GenerationOf(res.Generation, res.Err), res.Err, nil
		},
	})
	if err != nil {
		return nil, err
	}
	if !complete {
		// Redis did not hold the user's markers whole (lost, or never
		// read): the answer is the greater of this one and Postgres', so
		// it never shows less than a marker acknowledged before.
		held, err := g.fullyReadOf(ctx, k.User, []fullyread.Ref{m.Ref})
		if err != nil {
			return nil, err
		}
		if d, ok := held[m.Ref]; ok && fullyread.Order(d, w.Value) > 0 {
			w.Value, changed = d, false
		}
	}
	return connect.NewResponse(&receiptsv1.SetFullyReadResponse{
		UserId: k.User, ChannelId: k.Channel, ThreadRootSeq: m.Root, FullyRead: fullyReadProto(w.Value),
		Changed: changed, Durability: w.Durability, RealtimeDegraded: w.Degraded,
	}), nil
}

func (g *Gate) fullyReadStore() fullyread.Store { return fullyread.NewStore(g.PG, g.Redis) }

func fullyReadProto(m fullyread.Marker) *receiptsv1.FullyRead {
	if m.Seq == 0 {
		return nil
	}
	return &receiptsv1.FullyRead{Seq: m.Seq, MessageId: m.MessageID, UpdatedAtUnixMs: m.UpdatedAtUnixMs}
}

// fullyReadOfChannels sets the markers of a read-state answer's channels,
// and of listed channels it lacks (a marker set where no cursor is yet).
func (g *Gate) fullyReadOfChannels(ctx context.Context, user string, listed []string, resp *receiptsv1.GetReadStateResponse) error {
	byChannel := make(map[string]*receiptsv1.ChannelState, len(resp.Channels))
	refs := make([]fullyread.Ref, 0, len(resp.Channels)+len(listed))
	for _, cs := range resp.Channels {
		byChannel[cs.GetChannelId()] = cs
		refs = append(refs, fullyread.Ref{Key: receipt.Key{User: user, Channel: cs.GetChannelId()}})
	}
	for _, ch := range listed {
		if _, ok := byChannel[ch]; !ok {
			refs = append(refs, fullyread.Ref{Key: receipt.Key{User: user, Channel: ch}})
		}
	}
	ms, err := g.fullyReadOf(ctx, user, refs)
	if err != nil {
		return err
	}
	for _, r := range refs {
		m, ok := ms[r]
		if !ok {
			continue
		}
		cs := byChannel[r.Key.Channel]
		if cs == nil {
			cs = &receiptsv1.ChannelState{ChannelId: r.Key.Channel}
			byChannel[r.Key.Channel] = cs
			resp.Channels = append(resp.Channels, cs)
		}
		cs.FullyRead = fullyReadProto(m)
	}
	return nil
}

// fullyReadOfThreads sets the markers of a thread list's threads.
func (g *Gate) fullyReadOfThreads(ctx context.Context, user string, resp *receiptsv1.ListThreadsResponse) error {
	if len(resp.Threads) == 0 {
		return nil
	}
	refs := make([]fullyread.Ref, len(resp.Threads))
	for i, t := range resp.Threads {
		refs[i] = fullyread.Ref{Key: receipt.Key{User: user, Channel: t.GetChannelId()}, Root: t.GetRootSeq()}
	}
	ms, err := g.fullyReadOf(ctx, user, refs)
	if err != nil {
		return err
	}
	for i, t := range resp.Threads {
		if m, ok := ms[refs[i]]; ok {
			t.FullyRead = fullyReadProto(m)
		}
	}
	return nil
}

// fullyReadOf reads user's markers of refs: from Redis when its hash is
// complete (hydrated); else, once Postgres holds what Redis may have lost
// (Settled), from Postgres merged with what Redis holds, which then
// hydrates Redis. A hash that is not complete is not trusted even when it
// holds every ref: after a loss, a device may have set an older marker
// there while Postgres keeps the newer one. Without either store the call is
// Unavailable: an answer without the markers would look like none set.
func (g *Gate) fullyReadOf(ctx context.Context, user string, refs []fullyread.Ref) (map[fullyread.Ref]fullyread.Marker, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	s := g.fullyReadStore()
	cached, complete, rerr := s.ReadRedis(ctx, user, refs)
	if rerr == nil && complete {
		return cached, nil
	}
	if rerr != nil {
		g.RedisDegradedOn(ctx, seam.RedisOpGet, 1, rerr)
	}
	if err := g.Settled(ctx, []string{user}, nil); err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	all, err := s.UserPG(pctx, user, pgstore.MaxChannelsPerRead)
	cancel()
	if err != nil {
		return nil, g.DurableErr(ctx, err)
	}
	want := make(map[fullyread.Ref]bool, len(refs))
	for _, r := range refs {
		want[r] = true
	}
	out := make(map[fullyread.Ref]fullyread.Marker, len(refs))
	for _, m := range all {
		if want[m.Ref] {
			out[m.Ref] = m
		}
	}
	if len(all) == pgstore.MaxChannelsPerRead {
		// More markers than one read returns: the refs' own rows.
		pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
		some, err := s.ReadPG(pctx, refs)
		cancel()
		if err != nil {
			return nil, g.DurableErr(ctx, err)
		}
		for _, m := range some {
			out[m.Ref] = m
		}
	}
	for r, m := range cached { // newer in Redis than in Postgres, maybe
		out[r], _ = fullyread.Merge(out[r], m)
	}
	if rerr == nil {
		if err := s.Hydrate(ctx, user, all, len(all) < pgstore.MaxChannelsPerRead); err != nil {
			g.M.RedisDegraded.WithLabelValues(seam.RedisOpHydrate).Inc()
			g.WarnRedis(ctx, seam.RedisOpHydrate+" fully-read markers", err)
		}
	}
	return out, nil
}
