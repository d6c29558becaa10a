package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/watch"
)

// watchSSEPath serves WatchChannels as server-sent events.
const watchSSEPath = "/v1/channels:watch"

// watchRPCPath is WatchChannels over gRPC, gRPC-Web and Connect.
const watchRPCPath = rpcPathPrefix + "WatchChannels"

// errShuttingDown ends the watch streams of a draining server; clients
// resume elsewhere with their last token.
var errShuttingDown = errors.New("server shutting down: resume with the last resume_token")

// live is the gate's side of the watch streams: the hub, and a context
// that ends when the HTTP server starts its shutdown.
type live struct {
	hub       *watch.Hub
	heartbeat time.Duration
	stopping  context.Context
	stop      context.CancelFunc
}

// newLive makes the hub's snapshots the ticks read's answers (ticks),
// so that a snapshot carries the head and the watermarks, not only the
// members' cursors.
func newLive(cfg Config, ticks watch.TicksFunc) live {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Watch != nil {
		cfg.Watch.SetTicks(ticks)
	}
	return live{hub: cfg.Watch, heartbeat: cfg.WatchHeartbeat, stopping: ctx, stop: cancel}
}

// watchTicks is a watch snapshot of one channel: what GetTicks answers
// (head, delivered_to_all_up_to, read_by_all_up_to, member count, and for
// a small channel each member's public cursors).
func (g *Gate) watchTicks(ctx context.Context, ch string) (*receiptsv1.ChannelTicks, error) {
	s, err := g.sight(ctx, ch)
	if err != nil {
		return nil, err
	}
	return g.ticksOf(ctx, s)
}

// subscribe validates a watch request and opens its subscription.
func (g *Gate) subscribe(ctx context.Context, channels []string, token string) (*watch.Subscription, error) {
	if g.live.hub == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("watch streams are not enabled on this gateway"))
	}
	for i, ch := range channels {
		if err := receipt.ValidateID(fmt.Sprintf("channel_id[%d]", i), ch); err != nil {
			return nil, invalid(err)
		}
	}
	sub, err := g.live.hub.Subscribe(ctx, channels, token)
	if err != nil {
		return nil, watchError(ctx, err)
	}
	return sub, nil
}

// watchError maps a watch failure to its code.
func watchError(ctx context.Context, err error) error {
	if cerr := contextError(ctx, err); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, watch.ErrBadToken), errors.Is(err, watch.ErrNoChannels), errors.Is(err, watch.ErrTooManyChannels):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, watch.ErrTooManySubscribers):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, watch.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, errShuttingDown)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// untilStopping returns ctx, also ended when the server starts shutting
// down.
func (g *Gate) untilStopping(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.live.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// WatchChannels implements receiptsv1connect.ReceiptServiceHandler: the
// subscription's events until the client goes away or the server shuts
// down (Unavailable: resume with the last token).
func (g *Gate) WatchChannels(ctx context.Context, req *connect.Request[receiptsv1.WatchChannelsRequest], stream *connect.ServerStream[receiptsv1.WatchEvent]) error {
	sub, err := g.subscribe(ctx, req.Msg.GetChannelId(), req.Msg.GetResumeToken())
	if err != nil {
		return err
	}
	defer sub.Close()
	sctx, done := g.untilStopping(ctx)
	defer done()
	for {
		ev, err := sub.Next(sctx)
		if err != nil {
			if ctx.Err() == nil && g.live.stopping.Err() != nil {
				return connect.NewError(connect.CodeUnavailable, errShuttingDown)
			}
			return watchError(ctx, err)
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// serveWatchSSE serves GET /v1/channels:watch?channel_id=…&resume_token=…
// as server-sent events: one event per WatchEvent, its id the resume token
// (so a browser's EventSource resumes by itself with Last-Event-ID), its
// data the event's protojson; a comment line after WatchHeartbeat of
// silence. A failure after the stream started is an "error" event with a
// google.rpc.Status-like JSON body.
func (g *Gate) serveWatchSSE(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("resume_token")
	if token == "" {
		token = r.Header.Get("Last-Event-ID")
	}
	sub, err := g.subscribe(r.Context(), q["channel_id"], token)
	if err != nil {
		code := connect.CodeOf(err)
		writeRESTError(w, httpStatus(code), code, watchMessage(err))
		return
	}
	defer sub.Close()
	// The server's write timeout bounds unary calls; a stream lives on.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, ": watching %d channels\n\n", len(sub.Channels())); err != nil || rc.Flush() != nil {
		return
	}
	ctx, done := g.untilStopping(r.Context())
	defer done()
	for {
		nctx, cancel := context.WithTimeout(ctx, g.live.heartbeat)
		ev, err := sub.Next(nctx)
		cancel()
		switch {
		case err == nil:
			data, merr := protojson.Marshal(ev)
			if merr != nil {
				g.log.Error("encoding a watch event", zap.Error(merr))
				return
			}
			_, err = fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev.GetResumeToken(), data)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			_, err = w.Write([]byte(": heartbeat\n\n"))
		case r.Context().Err() != nil:
			return // the client went away
		default:
			werr := watchError(r.Context(), err)
			if g.live.stopping.Err() != nil {
				werr = connect.NewError(connect.CodeUnavailable, errShuttingDown)
			}
			_, _ = fmt.Fprintf(w, "event: error\ndata: {\"code\":%d,\"message\":%q}\n\n", int(connect.CodeOf(werr)), watchMessage(werr))
			_ = rc.Flush()
			return
		}
		if err != nil || rc.Flush() != nil {
			return
		}
	}
}

// watchMessage is a connect error's message without the code prefix.
func watchMessage(err error) string {
	if ce, ok := errors.AsType[*connect.Error](err); ok {
		return ce.Message()
	}
	return err.Error()
}

// httpStatus is the HTTP status of a code, as vanguard answers REST.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeInvalidArgument:
		return http.StatusBadRequest
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeCanceled:
		return 499
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusServiceUnavailable
}

// streamDeadlines lifts the server's read and write timeouts for
// WatchChannels over gRPC, gRPC-Web and Connect: they bound unary calls,
// and a watch stream lives until the client or the server ends it.
func (g *Gate) streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, watchRPCPath) {
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Time{})
			_ = rc.SetReadDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}
