package apierr_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/receipt"
)

// refusal is the error every test server answers MarkRead with.
func refusal() *connect.Error {
	return apierr.New(connect.CodeAborted, apierr.HeadBehind,
		&receipt.FieldError{Field: "seq", Reason: "beyond the head"}, apierr.Head(7), apierr.RetryAfter(1500*time.Millisecond))
}

type refusing struct {
	receiptsv1connect.UnimplementedReceiptServiceHandler
}

func (refusing) MarkRead(context.Context, *connect.Request[receiptsv1.MarkRequest]) (*connect.Response[receiptsv1.MarkResponse], error) {
	return nil, refusal()
}

func TestNewFillsTheErrorInfo(t *testing.T) {
	t.Parallel()
	err := refusal()
	require.Equal(t, connect.CodeAborted, err.Code())
	require.Equal(t, "seq: beyond the head", err.Message())
	require.Equal(t, "2", err.Meta().Get("Retry-After"), "rounded up to whole seconds")
	info := apierr.InfoOf(fmtWrap(err))
	require.NotNil(t, info, "found through wrapping")
	require.Equal(t, "HEAD_BEHIND", info.GetReason())
	require.Equal(t, "receipts.v1", info.GetDomain())
	require.Equal(t, map[string]string{"field": "seq", "head": "7", "retry_after_seconds": "2"}, info.GetMetadata())

	require.Empty(t, apierr.ReasonOf(errors.New("plain")))
	require.Empty(t, apierr.ReasonOf(connect.NewError(connect.CodeInternal, errors.New("no details"))))
	plain := apierr.New(connect.CodeInternal, apierr.Internal, errors.New("no field"))
	require.Empty(t, apierr.InfoOf(plain).GetMetadata(), "no field, no metadata")
	require.Empty(t, plain.Meta().Get("Retry-After"))
}

func fmtWrap(err error) error { return errors.Join(errors.New("context"), err) }

// Every reason is a stable UPPER_SNAKE string, listed once, and the API
// reference lists each with its meaning.
func TestReasonsAreDocumented(t *testing.T) {
	t.Parallel()
	readme, err := readFile("../../docs/api.md")
	require.NoError(t, err)
	seen := map[apierr.Reason]bool{}
	for _, r := range apierr.Reasons {
		require.Regexp(t, regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`), string(r))
		require.False(t, seen[r], "%s listed twice", r)
		seen[r] = true
		require.True(t, strings.Contains(readme, "| `"+string(r)+"` |"), "docs/api.md's error table lacks %s", r)
	}
}

// A refusal reaches every protocol's client with its reason: from a
// connect handler (gRPC, gRPC-Web, Connect; REST through vanguard), and
// from Write outside any handler (the API guard's path). The REST body of
// WriteREST is vanguard's, field for field.
func TestReasonReachesEveryProtocol(t *testing.T) {
	t.Parallel()
	path, handler := receiptsv1connect.NewReceiptServiceHandler(refusing{})
	tc, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(path, handler)})
	require.NoError(t, err)
	servers := map[string]http.Handler{
		"handler": tc,
		"Write": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			apierr.Write(w, r, refusal())
		}),
	}
	var restBodies []any
	for name, h := range servers {
		srv := httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		for proto, opts := range map[string][]connect.ClientOption{
			"gRPC": {connect.WithGRPC()}, "gRPC-Web": {connect.WithGRPCWeb()}, "Connect": nil,
			"Connect GET": {connect.WithHTTPGet()},
		} {
			client := receiptsv1connect.NewReceiptServiceClient(srv.Client(), srv.URL, opts...)
			_, err := client.MarkRead(t.Context(), connect.NewRequest(&receiptsv1.MarkRequest{UserId: "u", ChannelId: "c", Seq: 9}))
			require.Equal(t, connect.CodeAborted, connect.CodeOf(err), "%s %s: %v", name, proto, err)
			require.Equal(t, apierr.HeadBehind, apierr.ReasonOf(err), "%s %s: %v", name, proto, err)
			require.Equal(t, "seq", apierr.InfoOf(err).GetMetadata()["field"], "%s %s", name, proto)
			var cerr *connect.Error
			require.ErrorAs(t, err, &cerr)
			require.Equal(t, "2", cerr.Meta().Get("Retry-After"), "%s %s", name, proto)
		}
		resp, err := srv.Client().Post(srv.URL+"/v1/users/u/channels/c/read", "application/json", strings.NewReader(`{"seq":9}`))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, resp.StatusCode, "%s REST: %s", name, body)
		require.Equal(t, "2", resp.Header.Get("Retry-After"), name)
		info := apierr.InfoOfREST(body)
		require.Equal(t, "HEAD_BEHIND", info.GetReason(), "%s REST: %s", name, body)
		require.Equal(t, "7", info.GetMetadata()["head"], name)
		var v any
		require.NoError(t, json.Unmarshal(body, &v))
		restBodies = append(restBodies, v)
	}
	require.Equal(t, restBodies[0], restBodies[1], "the REST body of Write is vanguard's")
	require.Nil(t, apierr.InfoOfREST([]byte(`{"code":3,"message":"m","details":[]}`)))
	require.Nil(t, apierr.InfoOfREST([]byte(`not json`)))
}

func readFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	return string(b), err
}
