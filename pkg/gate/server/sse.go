package server

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
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/gate"
)

// watchSSEPath serves WatchChannels as server-sent events.
const watchSSEPath = "/v1/channels:watch"

// watchRPCPath is WatchChannels over gRPC, gRPC-Web and Connect.
const watchRPCPath = rpcPathPrefix + "WatchChannels"

// serveWatchSSE serves GET /v1/channels:watch?channel_id=…&resume_token=…
// as server-sent events: one event per WatchEvent, its id the resume token
// (so a browser's EventSource resumes by itself with Last-Event-ID), its
// data the event's protojson; a comment line after WatchHeartbeat of
// silence. Each write has WatchWriteTimeout: a client that stops reading
// is dropped. A failure after the stream started is an "error" event whose
// data is the REST error body (a google.rpc.Status with its ErrorInfo).
func (s *Server) serveWatchSSE(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := s.auth.authorize(r.Context(), watchRPCPath, &receiptsv1.WatchChannelsRequest{ChannelId: q["channel_id"]}); err != nil {
		s.writeREST(w, r, err)
		return
	}
	token := q.Get("resume_token")
	if token == "" {
		token = r.Header.Get("Last-Event-ID")
	}
	sub, err := s.gate.Subscribe(r.Context(), q["channel_id"], token)
	if err != nil {
		s.writeREST(w, r, err)
		return
	}
	defer sub.Close()
	// The server's write timeout bounds unary calls; a stream lives on,
	// each of its writes bounded instead.
	sw := s.deadlineWriter(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(sw, ": watching %d channels\n\n", len(sub.Channels())); err != nil || sw.flush() != nil {
		return
	}
	ctx, done := s.gate.WatchContext(r.Context())
	defer done()
	for {
		nctx, cancel := context.WithTimeout(ctx, s.cfg.WatchHeartbeat)
		ev, err := sub.Next(nctx)
		cancel()
		switch {
		case err == nil:
			data, merr := protojson.Marshal(ev)
			if merr != nil {
				s.log.Error("encoding a watch event", zap.Error(merr))
				return
			}
			_, err = fmt.Fprintf(sw, "id: %s\ndata: %s\n\n", ev.GetResumeToken(), data)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			_, err = sw.Write([]byte(": heartbeat\n\n"))
		case r.Context().Err() != nil:
			return // the client went away
		default:
			werr := s.gate.WatchStreamError(r.Context(), err)
			_, _ = fmt.Fprintf(sw, "event: error\ndata: %s\n\n", apierr.StatusJSON(apierr.WithRequestInfo(r.Context(), werr)))
			_ = sw.flush()
			return
		}
		if err != nil || sw.flush() != nil {
			return
		}
	}
}

// streamDeadlines replaces the server's read and write timeouts of
// WatchChannels over gRPC, gRPC-Web and Connect (they bound unary calls,
// and a watch stream lives until the client or the server ends it) with a
// WatchWriteTimeout on each write: a client that stops reading is
// dropped, not held.
func (s *Server) streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, watchRPCPath) {
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
			w = s.deadlineWriter(w)
		}
		next.ServeHTTP(w, r)
	})
}

// streamWriter bounds each write of a stream: the deadline is set before a
// write and cleared after its flush, so that an idle stream (between
// events) is never cut, and a write its client does not take in time
// fails (HTTP/1: the connection's deadline; HTTP/2: the stream's, which
// resets the stream). It clears the server's WriteTimeout at once.
type streamWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	d      time.Duration
	m      *metrics
	failed bool
}

func (s *Server) deadlineWriter(w http.ResponseWriter) *streamWriter {
	sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.cfg.WatchWriteTimeout, m: s.m}
	_ = sw.rc.SetWriteDeadline(time.Time{})
	return sw
}

func (w *streamWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	n, err := w.ResponseWriter.Write(b)
	w.fail(err)
	return n, err
}

// fail counts the stream's first failed write.
func (w *streamWriter) fail(err error) {
	if err != nil && !w.failed {
		w.failed = true
		w.m.watchDropped.Inc()
	}
}

// flush sends what was written, within the deadline, then clears it.
func (w *streamWriter) flush() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	if err := w.rc.Flush(); err != nil {
		w.fail(err)
		return err
	}
	return w.rc.SetWriteDeadline(time.Time{})
}

// Flush is http.Flusher's (connect flushes after each message).
func (w *streamWriter) Flush() { _ = w.flush() }

// Unwrap lets http.ResponseController reach the connection.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// watching is the gate with WatchChannels served with heartbeats: after
// WatchHeartbeat without an event, an event without updates carrying the
// last resume token, whose write (bounded by streamDeadlines) tells a
// client that still reads from one that stopped.
type watching struct {
	*gate.Gate
	s *Server
}

// WatchChannels implements receiptsv1connect.ReceiptServiceHandler.
func (v watching) WatchChannels(ctx context.Context, req *connect.Request[receiptsv1.WatchChannelsRequest], stream *connect.ServerStream[receiptsv1.WatchEvent]) error {
	sub, err := v.Gate.Subscribe(ctx, req.Msg.GetChannelId(), req.Msg.GetResumeToken())
	if err != nil {
		return err
	}
	defer sub.Close()
	sctx, done := v.Gate.WatchContext(ctx)
	defer done()
	for {
		nctx, cancel := context.WithTimeout(sctx, v.s.cfg.WatchHeartbeat)
		ev, err := sub.Next(nctx)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) && sctx.Err() == nil:
			ev = sub.Heartbeat()
		default:
			return v.Gate.WatchStreamError(ctx, err)
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}
