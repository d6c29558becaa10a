package apiauth

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// rejection is a refusal in the terms of every protocol the API speaks.
type rejection struct {
	httpStatus int    // REST and Connect unary
	grpcCode   int    // gRPC, gRPC-Web; also the REST body's code
	connect    string // Connect's code name
	msg        string
	retryAfter time.Duration
}

func unauthenticated(msg string) rejection {
	return rejection{httpStatus: http.StatusUnauthorized, grpcCode: 16, connect: "unauthenticated", msg: msg}
}

func rateLimited(msg string, retryAfter time.Duration) rejection {
	return rejection{httpStatus: http.StatusTooManyRequests, grpcCode: 8, connect: "resource_exhausted", msg: msg, retryAfter: retryAfter}
}

// RetryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(max(1, (d+time.Second-1)/time.Second)), 10)
}

// write answers r with the refusal in the request's protocol: gRPC and
// gRPC-Web get a trailers-only response (grpc-status in the headers),
// Connect streams an end-of-stream message, Connect unary calls the
// Connect error JSON, and REST a JSON google.rpc.Status (vanguard's shape)
// under the HTTP status.
func (rj rejection) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if rj.retryAfter > 0 {
		h.Set("Retry-After", RetryAfterSeconds(rj.retryAfter))
	}
	if rj.grpcCode == 16 {
		h.Set("WWW-Authenticate", `Bearer realm="receipts"`)
	}
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc"):
		h.Set("Content-Type", ct)
		h.Set("Grpc-Status", strconv.Itoa(rj.grpcCode))
		h.Set("Grpc-Message", url.PathEscape(rj.msg))
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(ct, "application/connect+"):
		end, _ := json.Marshal(map[string]any{"error": map[string]string{"code": rj.connect, "message": rj.msg}})
		frame := make([]byte, 5, 5+len(end))
		frame[0] = 0x02 // end of stream
		binary.BigEndian.PutUint32(frame[1:], uint32(len(end)))
		h.Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(frame, end...))
	case isConnectUnary(r):
		h.Set("Content-Type", "application/json")
		w.WriteHeader(rj.httpStatus)
		_ = json.NewEncoder(w).Encode(map[string]string{"code": rj.connect, "message": rj.msg})
	default:
		h.Set("Content-Type", "application/json")
		w.WriteHeader(rj.httpStatus)
		_ = json.NewEncoder(w).Encode(struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}{rj.grpcCode, rj.msg})
	}
}

// isConnectUnary tells a Connect unary call (POST or GET to
// /package.Service/Method) from a REST route, whose first segment never
// holds a dot.
func isConnectUnary(r *http.Request) bool {
	if r.Header.Get("Connect-Protocol-Version") != "" {
		return true
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return ok && strings.Contains(svc, ".") && method != "" && !strings.Contains(method, "/")
}
