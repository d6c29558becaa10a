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
)

// watchSSEPath serves WatchChannels as server-sent events.
const watchSSEPath = "/v1/channels:watch"

// watchRPCPath is WatchChannels over gRPC, gRPC-Web and Connect.
const watchRPCPath = rpcPathPrefix + "WatchChannels"

// serveWatchSSE serves GET /v1/channels:watch?channel_id=…&resume_token=…
// as server-sent events: one event per WatchEvent, its id the resume token
// (so a browser's EventSource resumes by itself with Last-Event-ID), its
// data the event's protojson; a comment line after WatchHeartbeat of
// silence. A failure after the stream started is an "error" event with a
// google.rpc.Status-like JSON body.
func (s *Server) serveWatchSSE(w http.ResponseWriter, r *http.Request) {
	if err := authorize(r.Context(), watchRPCPath); err != nil {
		writeRESTError(w, http.StatusForbidden, connect.CodePermissionDenied, watchMessage(err))
		return
	}
	q := r.URL.Query()
	token := q.Get("resume_token")
	if token == "" {
		token = r.Header.Get("Last-Event-ID")
	}
	sub, err := s.gate.Subscribe(r.Context(), q["channel_id"], token)
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
			_, err = fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev.GetResumeToken(), data)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			_, err = w.Write([]byte(": heartbeat\n\n"))
		case r.Context().Err() != nil:
			return // the client went away
		default:
			werr := s.gate.WatchStreamError(r.Context(), err)
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
func streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, watchRPCPath) {
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Time{})
			_ = rc.SetReadDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}
