package apierr

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// RequestIDHeader is the header a caller may name its request with: the
// API echoes it in the answer and puts it in a refusal's RequestInfo.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDBytes bounds an accepted X-Request-Id.
const MaxRequestIDBytes = 128

type requestIDKey struct{}

// ContextWithRequestID is ctx carrying the caller's request id.
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// ValidRequestID reports whether id may be echoed: 1 to MaxRequestIDBytes
// of printable ASCII, no space.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDBytes {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// RequestID is what a refusal names its request with: the caller's
// X-Request-Id when it sent one, else the trace id of the call's span (or
// of the trace context it arrived with), else "".
func RequestID(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok && id != "" {
		return id
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// WithRequestInfo is err with a google.rpc.RequestInfo detail naming the
// request (RequestID(ctx)), as a *connect.Error (err's code); err as it is
// when ctx names no request, or when it already has one.
func WithRequestInfo(ctx context.Context, err error) error {
	id := RequestID(ctx)
	if id == "" || err == nil {
		return err
	}
	if RequestInfoOf(err) != nil {
		return err
	}
	// A copy: err may be a shared value (a sentinel), never to be changed.
	var cerr *connect.Error
	if orig, ok := errors.AsType[*connect.Error](err); ok {
		cause := orig.Unwrap()
		if cause == nil {
			cause = errors.New(orig.Message())
		}
		cerr = connect.NewError(orig.Code(), cause)
		for _, d := range orig.Details() {
			cerr.AddDetail(d)
		}
		for k, v := range orig.Meta() {
			cerr.Meta()[k] = append([]string(nil), v...)
		}
	} else {
		cerr = connect.NewError(connect.CodeOf(err), err)
	}
	if d, derr := connect.NewErrorDetail(&errdetails.RequestInfo{RequestId: id}); derr == nil {
		cerr.AddDetail(d)
	}
	return cerr
}

// RequestInfoOf is the RequestInfo detail of err, or nil.
func RequestInfoOf(err error) *errdetails.RequestInfo {
	cerr, ok := errors.AsType[*connect.Error](err)
	if !ok {
		return nil
	}
	for _, d := range cerr.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.RequestInfo); ok {
				return info
			}
		}
	}
	return nil
}

// RequestInfoOfREST is the RequestInfo in a REST error body, or nil.
func RequestInfoOfREST(body []byte) *errdetails.RequestInfo {
	var st status.Status
	if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &st) != nil {
		return nil
	}
	for _, d := range st.GetDetails() {
		var info errdetails.RequestInfo
		if d.MessageIs(&info) && d.UnmarshalTo(&info) == nil {
			return &info
		}
	}
	return nil
}

// WithRequestInfoJSON is a REST error body (a JSON google.rpc.Status
// written by someone else: vanguard) with the RequestInfo of ctx added;
// body as it is when ctx names no request, when it has one already, or
// when it is no Status.
func WithRequestInfoJSON(ctx context.Context, body []byte) []byte {
	id := RequestID(ctx)
	if id == "" {
		return body
	}
	var st status.Status
	if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &st) != nil {
		return body
	}
	for _, d := range st.GetDetails() {
		if d.MessageIs(&errdetails.RequestInfo{}) {
			return body
		}
	}
	a, err := anypb.New(&errdetails.RequestInfo{RequestId: id})
	if err != nil {
		return body
	}
	st.Details = append(st.Details, a)
	out, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(&st)
	if err != nil {
		return body
	}
	return out
}
