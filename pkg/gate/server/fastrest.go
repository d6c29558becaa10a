package server

import (
	"context"
	"maps"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/gate/markcalls"
	"github.com/readstate/receipts/pkg/gate/rest"
)

// The fast REST path of the hot write routes (POST /v1/receipts:mark and
// the single-mark routes) and of the big reads (GET …/unread, …/threads
// and …/inbox): the JSON body or the query is decoded straight into the
// request message and the answer encoded by hand (pkg/gate/rest), instead
// of vanguard transcoding REST to Connect and protojson (de)coding both
// ways. The same handler methods run, so validation, the write path and
// the errors are the same code, and an error is written as vanguard
// writes it (apierr.WriteREST). A body or query the codec does not read
// exactly as vanguard would, a compressed body or an unusual content type
// fall back to vanguard, which gives the canonical answer, error or
// success.

// serveFastREST answers r on the fast path and reports true, or reports
// false without writing anything (the caller goes on to vanguard). body
// is the whole request body, already bounded.
func (s *Server) serveFastREST(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if s.cfg.TranscodeAllREST || r.Header.Get("Content-Encoding") != "" || r.Header.Get("X-Server-Timeout") != "" {
		return false
	}
	if r.Method == http.MethodGet && len(body) == 0 {
		return s.serveFastUnread(w, r) || s.serveFastThreads(w, r) || s.serveFastInbox(w, r)
	}
	if r.URL.RawQuery != "" {
		return false
	}
	if r.Method != http.MethodPost {
		return false
	}
	switch r.Header.Get("Content-Type") {
	case "", "application/json", "application/json; charset=utf-8":
	default:
		return false
	}
	start := time.Now()
	path := r.URL.Path // escaped: see routeEscapedPath
	if path == rest.MarkPath {
		req, n, ok := rest.DecodeMarkReceipts(body, s.gate.MaxBatchItems())
		if !ok {
			return false
		}
		fastSpan(r.Context(), "MarkReceipts", req)
		if err := s.auth.authorize(r.Context(), receiptsv1connect.ReceiptServiceMarkReceiptsProcedure, req); err != nil {
			s.observeFast(r.Context(), "MarkReceipts", start, err)
			s.writeREST(w, r, err)
			return true
		}
		// The batch's cost beyond the guard's door charge, as
		// chargeEvents charges it on the other paths.
		if n > 1 {
			if err := apiauth.Charge(r.Context(), n-1); err != nil {
				err = apiauth.RateLimited(err)
				s.observeFast(r.Context(), "MarkReceipts", start, err)
				s.writeREST(w, r, err)
				return true
			}
		}
		if n > s.gate.MaxBatchItems() {
			// Refused while decoding: the receipts past the limit were
			// counted, never kept.
			err := markcalls.BatchTooLarge(n, s.gate.MaxBatchItems())
			s.observeFast(r.Context(), "MarkReceipts", start, err)
			s.writeREST(w, r, err)
			return true
		}
		creq := connect.NewRequest(req)
		maps.Copy(creq.Header(), r.Header)
		resp, err := s.gate.MarkReceipts(r.Context(), creq)
		s.observeFast(r.Context(), "MarkReceipts", start, err)
		if err != nil {
			s.writeREST(w, r, err)
			return true
		}
		rest.WriteMarkReceipts(w, resp.Msg)
		return true
	}
	user, channel, kind, ok := rest.SingleMarkRoute(path)
	if !ok {
		return false
	}
	req, ok := rest.DecodeMark(body)
	if !ok {
		return false
	}
	req.UserId, req.ChannelId = user, channel
	rpc := "MarkDelivered"
	if kind == receiptsv1.Kind_READ {
		rpc = "MarkRead"
	}
	fastSpan(r.Context(), rpc, req)
	creq := connect.NewRequest(req)
	maps.Copy(creq.Header(), r.Header)
	var (
		resp *connect.Response[receiptsv1.MarkResponse]
		err  error
	)
	if kind == receiptsv1.Kind_READ {
		if err = s.auth.authorize(r.Context(), receiptsv1connect.ReceiptServiceMarkReadProcedure, req); err == nil {
			resp, err = s.gate.MarkRead(r.Context(), creq)
		}
	} else {
		if err = s.auth.authorize(r.Context(), receiptsv1connect.ReceiptServiceMarkDeliveredProcedure, req); err == nil {
			resp, err = s.gate.MarkDelivered(r.Context(), creq)
		}
	}
	s.observeFast(r.Context(), rpc, start, err)
	if err != nil {
		s.writeREST(w, r, err)
		return true
	}
	rest.WriteMark(w, resp.Msg)
	return true
}

// serveFastUnread answers GET /v1/users/{user_id}/unread (the default
// channel set; a query of page_size and page_token only) with the
// hand-written encoder.
func (s *Server) serveFastUnread(w http.ResponseWriter, r *http.Request) bool {
	user, ok := rest.UnreadRoute(r.URL.Path)
	if !ok {
		return false
	}
	size, token, ok := rest.UnreadPageQuery(r.URL.RawQuery)
	if !ok {
		return false
	}
	req := &receiptsv1.GetUnreadRequest{UserId: user, PageSize: size, PageToken: token}
	serveFastRead(s, w, r, "GetUnread", receiptsv1connect.ReceiptServiceGetUnreadProcedure, req, s.gate.GetUnread, rest.WriteGetUnread)
	return true
}

// serveFastThreads answers GET /v1/users/{user_id}/threads (ListThreads)
// with the hand-written encoder.
func (s *Server) serveFastThreads(w http.ResponseWriter, r *http.Request) bool {
	user, ok := rest.ThreadsRoute(r.URL.Path)
	if !ok {
		return false
	}
	req, ok := rest.ThreadsQuery(r.URL.RawQuery)
	if !ok {
		return false
	}
	req.UserId = user
	serveFastRead(s, w, r, "ListThreads", receiptsv1connect.ReceiptServiceListThreadsProcedure, req, s.gate.ListThreads, rest.WriteListThreads)
	return true
}

// serveFastInbox answers GET /v1/users/{user_id}/inbox (GetInbox) with
// the hand-written encoder.
func (s *Server) serveFastInbox(w http.ResponseWriter, r *http.Request) bool {
	user, ok := rest.InboxRoute(r.URL.Path)
	if !ok {
		return false
	}
	req, ok := rest.InboxQuery(r.URL.RawQuery)
	if !ok {
		return false
	}
	req.UserId = user
	serveFastRead(s, w, r, "GetInbox", receiptsv1connect.ReceiptServiceGetInboxProcedure, req, s.gate.GetInbox, rest.WriteGetInbox)
	return true
}

// serveFastRead runs a read's handler method for the fast path: the
// request's headers passed on, the scope (and an end-user token's
// request) checked here (the fast path skips the interceptors), the call observed, the answer or the error
// written.
func serveFastRead[Req, Resp any](s *Server, w http.ResponseWriter, r *http.Request, rpc, procedure string, req *Req,
	call func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), write func(http.ResponseWriter, *Resp),
) {
	start := time.Now()
	if msg, ok := any(req).(proto.Message); ok {
		fastSpan(r.Context(), rpc, msg)
	}
	creq := connect.NewRequest(req)
	maps.Copy(creq.Header(), r.Header)
	var resp *connect.Response[Resp]
	err := s.auth.authorize(r.Context(), procedure, req)
	if err == nil {
		resp, err = call(r.Context(), creq)
	}
	s.observeFast(r.Context(), rpc, start, err)
	if err != nil {
		s.writeREST(w, r, err)
		return
	}
	write(w, resp.Msg)
}

// observeFast counts a fast-path call (as the interceptor counts the
// others) and records its result on its span.
func (s *Server) observeFast(ctx context.Context, rpc string, start time.Time, err error) {
	s.m.observe(rpc, start, err)
	fastDone(ctx, err)
}
