package apierr

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// httpStatus is the HTTP status of each code over REST (google.api's
// mapping, as vanguard answers).
var httpStatus = [...]int{
	http.StatusOK, 499, http.StatusInternalServerError, http.StatusBadRequest,
	http.StatusGatewayTimeout, http.StatusNotFound, http.StatusConflict, http.StatusForbidden,
	http.StatusTooManyRequests, http.StatusBadRequest, http.StatusConflict, http.StatusBadRequest,
	http.StatusNotImplemented, http.StatusInternalServerError, http.StatusServiceUnavailable,
	http.StatusInternalServerError, http.StatusUnauthorized,
}

// HTTPStatus is the REST status of code.
func HTTPStatus(code connect.Code) int {
	if int(code) < len(httpStatus) {
		return httpStatus[code]
	}
	return http.StatusInternalServerError
}

// Status is err as a google.rpc.Status: its code, message and details.
func Status(err error) *status.Status {
	st := &status.Status{Code: int32(connect.CodeOf(err)), Message: err.Error()}
	if cerr, ok := errors.AsType[*connect.Error](err); ok {
		st.Message = cerr.Message()
		for _, d := range cerr.Details() {
			st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
		}
	}
	return st
}

// StatusJSON is Status(err) as the REST body: protojson with every field,
// as vanguard writes it. It holds no newline (a server-sent event's data
// line carries it).
func StatusJSON(err error) []byte {
	b, merr := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(Status(err))
	if merr != nil {
		return []byte(`{"code":13,"message":"encoding the error failed","details":[]}`)
	}
	return b
}

// WriteREST answers a REST call with err as vanguard does: the status of
// its code, its metadata (Retry-After) as headers, and StatusJSON.
func WriteREST(w http.ResponseWriter, err error) {
	WriteRESTStatus(w, HTTPStatus(connect.CodeOf(err)), err)
}

// WriteRESTStatus is WriteREST under another HTTP status than the code's
// (413 for a body over the limit, which is ResourceExhausted).
func WriteRESTStatus(w http.ResponseWriter, status int, err error) {
	h := w.Header()
	if cerr, ok := errors.AsType[*connect.Error](err); ok {
		for k, v := range cerr.Meta() {
			h[k] = v
		}
	}
	body := StatusJSON(err)
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Write answers r with cerr in the request's protocol, for a refusal made
// before any connect handler runs (the API guard): gRPC and gRPC-Web get
// a trailers-only response (grpc-status and grpc-status-details-bin in
// the headers), a Connect stream its end-of-stream message, a Connect
// unary call the Connect error JSON, and REST WriteREST. cerr's metadata
// goes out as headers in every protocol, and its details gain the
// request's RequestInfo (WithRequestInfo).
func Write(w http.ResponseWriter, r *http.Request, cerr *connect.Error) {
	if e, ok := errors.AsType[*connect.Error](WithRequestInfo(r.Context(), cerr)); ok {
		cerr = e
	}
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect+") && !isConnectUnary(r) {
		WriteREST(w, cerr)
		return
	}
	h := w.Header()
	for k, v := range cerr.Meta() {
		h[k] = v
	}
	switch {
	case strings.HasPrefix(ct, "application/grpc"):
		h.Set("Content-Type", ct)
		h.Set("Grpc-Status", strconv.Itoa(int(cerr.Code())))
		h.Set("Grpc-Message", url.PathEscape(cerr.Message()))
		if bin, err := proto.Marshal(Status(cerr)); err == nil && len(cerr.Details()) > 0 {
			h.Set("Grpc-Status-Details-Bin", connect.EncodeBinaryHeader(bin))
		}
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(ct, "application/connect+"):
		end, _ := json.Marshal(map[string]any{"error": connectJSON(cerr)})
		frame := make([]byte, 5, 5+len(end))
		frame[0] = 0x02 // end of stream
		binary.BigEndian.PutUint32(frame[1:], uint32(len(end)))
		h.Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(frame, end...))
	default:
		h.Set("Content-Type", "application/json")
		w.WriteHeader(HTTPStatus(cerr.Code()))
		_ = json.NewEncoder(w).Encode(connectJSON(cerr))
	}
}

// connectJSON is cerr in the Connect protocol's error JSON.
func connectJSON(cerr *connect.Error) any {
	type detail struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	}
	details := make([]detail, len(cerr.Details()))
	for i, d := range cerr.Details() {
		details[i] = detail{Type: d.Type(), Value: base64.RawStdEncoding.EncodeToString(d.Bytes())}
	}
	return struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Details []detail `json:"details,omitempty"`
	}{cerr.Code().String(), cerr.Message(), details}
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
