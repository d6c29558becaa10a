package apierr_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/readstate/receipts/pkg/apierr"
)

func TestWithRequestInfo(t *testing.T) {
	t.Parallel()
	sentinel := apierr.New(connect.CodeInvalidArgument, apierr.InvalidID, errors.New("bad"))
	sentinel.Meta().Set("Retry-After", "3")

	// No id, no trace: the error as it is.
	require.Same(t, error(sentinel), apierr.WithRequestInfo(context.Background(), sentinel))

	// The trace id names the request; the caller's X-Request-Id wins.
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab}, SpanID: trace.SpanID{1}})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	require.Equal(t, sc.TraceID().String(), apierr.RequestID(traced))
	named := apierr.ContextWithRequestID(traced, "req-1")
	got := apierr.WithRequestInfo(named, sentinel)
	require.Equal(t, "req-1", apierr.RequestInfoOf(got).GetRequestId())
	require.Equal(t, apierr.InvalidID, apierr.ReasonOf(got), "the ErrorInfo stays")
	cerr, ok := errors.AsType[*connect.Error](got)
	require.True(t, ok)
	require.Equal(t, "3", cerr.Meta().Get("Retry-After"))
	require.Equal(t, "bad", cerr.Message())
	require.Nil(t, apierr.RequestInfoOf(sentinel), "a shared error is never changed")
	require.Same(t, got, apierr.WithRequestInfo(traced, got), "one RequestInfo only")

	// A plain error becomes a connect error of its code.
	plain := apierr.WithRequestInfo(traced, errors.New("boom"))
	require.Equal(t, connect.CodeUnknown, connect.CodeOf(plain))
	require.Equal(t, sc.TraceID().String(), apierr.RequestInfoOf(plain).GetRequestId())

	// Over REST the body carries it.
	w := httptest.NewRecorder()
	apierr.WriteREST(w, got)
	require.Equal(t, "req-1", apierr.RequestInfoOfREST(w.Body.Bytes()).GetRequestId())
	require.Equal(t, apierr.InvalidID, apierr.ReasonOf(got))

	// A body someone else wrote gains it once.
	body := apierr.StatusJSON(sentinel)
	added := apierr.WithRequestInfoJSON(traced, body)
	require.Equal(t, sc.TraceID().String(), apierr.RequestInfoOfREST(added).GetRequestId())
	require.NotNil(t, apierr.InfoOfREST(added))
	require.Equal(t, added, apierr.WithRequestInfoJSON(named, added))
	require.Equal(t, []byte("not json"), apierr.WithRequestInfoJSON(traced, []byte("not json")))
}

func TestValidRequestID(t *testing.T) {
	t.Parallel()
	require.True(t, apierr.ValidRequestID("req-42_a.b:c/d"))
	for _, bad := range []string{"", "has space", "new\nline", string(make([]byte, apierr.MaxRequestIDBytes+1)), "é"} {
		require.False(t, apierr.ValidRequestID(bad), "%q", bad)
	}
}
