package watchcalls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate/readbycalls"
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/watch"
)

// errShuttingDown ends the watch streams of a draining server; clients
// resume elsewhere with their last token.
var errShuttingDown = errors.New("server shutting down: resume with the last resume_token")

// Watch serves WatchChannels and the server-sent events route over the
// watch hub (pkg/watch); stopping ends when the server starts its
// shutdown (StopWatches).
type Watch struct {
	*seam.Core
	readBy   *readbycalls.ReadBy
	hub      *watch.Hub
	stopping context.Context
	stop     context.CancelFunc
}

// New returns the watch calls on core. It makes the hub's snapshots the
// ticks read's answers (readBy), so that a snapshot carries the head and
// the watermarks, not only the members' cursors.
func New(core *seam.Core, readBy *readbycalls.ReadBy) *Watch {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Watch{Core: core, readBy: readBy, hub: core.Cfg.Watch, stopping: ctx, stop: cancel}
	if g.hub != nil {
		g.hub.SetTicks(g.watchTicks)
		g.hub.SetSnapshotMembers(int(core.Cfg.ReadBy.Threshold()))
	}
	return g
}

// watchTicks is a watch snapshot of one channel: what GetTicks answers
// (head, delivered_to_all_up_to, read_by_all_up_to, member count, and for
// a small channel each member's public cursors).
func (g *Watch) watchTicks(ctx context.Context, ch string) (*receiptsv1.ChannelTicks, error) {
	s, err := g.readBy.Sight(ctx, ch)
	if err != nil {
		return nil, err
	}
	return g.readBy.TicksOf(ctx, s)
}

// WatchRetryAfter is the Retry-After of a watch stream refused because its
// client holds as many as it may (a stream ends when its client goes).
const WatchRetryAfter = 5 * time.Second

// Subscribe validates a watch request and opens its subscription; its
// errors are the API's (InvalidArgument, ResourceExhausted, Unavailable,
// Unimplemented without a hub). The server-sent events route uses it.
//
// A stream costs its client (apiauth) one event per channel against its
// rate limit (the guard charged the first at the door), and a client holds
// at most the hub's MaxStreamsPerClient streams on this replica: past
// either, ResourceExhausted with Retry-After.
func (g *Watch) Subscribe(ctx context.Context, channels []string, token string) (*watch.Subscription, error) {
	if g.hub == nil {
		return nil, apierr.New(connect.CodeUnimplemented, apierr.NotEnabled, errors.New("watch streams are not enabled on this gateway"))
	}
	for i, ch := range channels {
		if err := receipt.ValidateID(fmt.Sprintf("channel_id[%d]", i), ch); err != nil {
			return nil, seam.Invalid(apierr.InvalidID, err)
		}
	}
	var client string
	if c, ok := apiauth.ClientFrom(ctx); ok {
		client = c.Name
	}
	if err := seam.Charge(ctx, len(channels)-1); err != nil {
		return nil, err
	}
	sub, err := g.hub.SubscribeAs(ctx, client, channels, token)
	if err != nil {
		return nil, watchError(ctx, err)
	}
	return sub, nil
}

// watchError maps a watch failure to its code.
func watchError(ctx context.Context, err error) error {
	if cerr := seam.ContextError(ctx, err); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, watch.ErrBadToken):
		return seam.Invalid(apierr.InvalidField, err, apierr.Field("resume_token"))
	case errors.Is(err, watch.ErrNoChannels):
		return seam.Invalid(apierr.EmptyRequest, err, apierr.Field("channel_id"))
	case errors.Is(err, watch.ErrTooManyChannels):
		return seam.Invalid(apierr.BatchTooLarge, err, apierr.Field("channel_id"))
	case errors.Is(err, watch.ErrTooManySubscribers):
		return apierr.New(connect.CodeResourceExhausted, apierr.StreamLimit, err)
	case errors.Is(err, watch.ErrTooManyClientStreams):
		return apierr.New(connect.CodeResourceExhausted, apierr.StreamLimit, err, apierr.RetryAfter(WatchRetryAfter))
	case errors.Is(err, watch.ErrClosed):
		return seam.UnavailableError(errShuttingDown)
	}
	return seam.UnavailableError(err)
}

// StopWatches ends every watch stream with Unavailable (resume with the
// last token); the server calls it when it starts draining, since watch
// streams never end by themselves.
func (g *Watch) StopWatches() { g.stop() }

// WatchContext returns ctx, also ended by StopWatches.
func (g *Watch) WatchContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// WatchChannels implements receiptsv1connect.ReceiptServiceHandler: the
// subscription's events until the client goes away or the server shuts
// down (Unavailable: resume with the last token).
func (g *Watch) WatchChannels(ctx context.Context, req *connect.Request[receiptsv1.WatchChannelsRequest], stream *connect.ServerStream[receiptsv1.WatchEvent]) error {
	sub, err := g.Subscribe(ctx, req.Msg.GetChannelId(), req.Msg.GetResumeToken())
	if err != nil {
		return err
	}
	defer sub.Close()
	sctx, done := g.WatchContext(ctx)
	defer done()
	for {
		ev, err := sub.Next(sctx)
		if err != nil {
			return g.WatchStreamError(ctx, err)
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// WatchStreamError is the API error that ends a watch stream on a failed
// Next: Unavailable with "resume with the last resume_token" when the
// server is stopping the streams, else the failure's code.
func (g *Watch) WatchStreamError(ctx context.Context, err error) error {
	if ctx.Err() == nil && g.stopping.Err() != nil {
		return seam.UnavailableError(errShuttingDown)
	}
	return watchError(ctx, err)
}
