package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/pkg/apierr"
)

// maxVanguardErrorBytes bounds the error body reasonedREST holds back:
// vanguard's are a status line of text.
const maxVanguardErrorBytes = 64 << 10

// reasonedREST gives a reason to the REST refusals vanguard raises itself
// before the service sees the call (a body it cannot decode: an unknown
// field, a wrong type), whose google.rpc.Status has no ErrorInfo: such an
// InvalidArgument becomes MALFORMED_REQUEST, so that a REST caller finds a
// reason in every bad-request answer. Every other answer passes through
// as written.
func reasonedREST(next http.Handler, w http.ResponseWriter, r *http.Request) {
	rw := &reasonWriter{ResponseWriter: w, ctx: r.Context()}
	next.ServeHTTP(rw, r)
	rw.finish()
}

// reasonWriter holds back an error answer's body until the handler is
// done, then writes it with its reason.
type reasonWriter struct {
	http.ResponseWriter
	// ctx is the request's: its RequestInfo goes into vanguard's own
	// refusals (the service's have it from the interceptor).
	ctx    context.Context
	status int
	body   bytes.Buffer
}

func (w *reasonWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	if status < http.StatusBadRequest {
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *reasonWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status < http.StatusBadRequest {
		return w.ResponseWriter.Write(b)
	}
	if w.body.Len()+len(b) > maxVanguardErrorBytes {
		return 0, errors.New("error body over its bound")
	}
	return w.body.Write(b)
}

func (w *reasonWriter) finish() {
	if w.status < http.StatusBadRequest {
		return
	}
	body := w.body.Bytes()
	var st struct {
		Code    int    `json:"code"` // a number here (connect.Code reads the Connect names)
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) == nil && st.Code == int(connect.CodeInvalidArgument) && apierr.InfoOfREST(body) == nil {
		body = apierr.StatusJSON(apierr.New(connect.CodeInvalidArgument, apierr.MalformedRequest, errors.New(st.Message)))
	}
	if w.Header().Get("Content-Type") == "application/json" || strings.HasPrefix(w.Header().Get("Content-Type"), "application/json;") {
		body = apierr.WithRequestInfoJSON(w.ctx, body)
	}
	if w.Header().Get("Content-Length") != "" || len(body) != w.body.Len() {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(body)
}

// Flush passes an answer's flush on; an error's body waits for finish.
func (w *reasonWriter) Flush() {
	if w.status != 0 && w.status < http.StatusBadRequest {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *reasonWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
