package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/gate/server"
)

// One token per scope, one in the first name:token format and one of
// the older write scope.
var scopeTokens = map[apiauth.Scope]string{
	apiauth.ScopeMark:   "marker-token-0123456789",
	apiauth.ScopeNotify: "notifier-token-0123456789",
	apiauth.ScopeRead:   "reader-token-0123456789",
	apiauth.ScopeWatch:  "watcher-token-0123456789",
	apiauth.ScopeErase:  "eraser-token-0123456789",
}

const (
	legacyToken = "legacy-token-0123456789"
	writeToken  = "writer-token-0123456789"
)

// restRoute is a method's REST route with its path variables filled in.
func restRoute(rule *annotations.HttpRule) (method, path string, body bool) {
	switch p := rule.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		method, path = http.MethodGet, p.Get
	case *annotations.HttpRule_Post:
		method, path = http.MethodPost, p.Post
	case *annotations.HttpRule_Put:
		method, path = http.MethodPut, p.Put
	case *annotations.HttpRule_Delete:
		method, path = http.MethodDelete, p.Delete
	case *annotations.HttpRule_Patch:
		method, path = http.MethodPatch, p.Patch
	}
	path = regexp.MustCompile(`\{(seq|root_seq)\}`).ReplaceAllString(path, "1")
	path = regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "u1")
	return method, path, rule.GetBody() != ""
}

// TestScopesPerProcedure: every procedure of the ReceiptService, over REST
// (its google.api.http route, fast path included), Connect and gRPC, is
// refused with 403 / PermissionDenied naming its scope to a token without
// that scope, and not refused to one with it; no token is 401 first. A
// name:token line (no scopes) may do everything but erase.
func TestScopesPerProcedure(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	var file strings.Builder
	for scope, tok := range scopeTokens {
		fmt.Fprintf(&file, "only-%s:%s:%s\n", scope, tok, scope)
	}
	fmt.Fprintf(&file, "legacy:%s\n", legacyToken)
	fmt.Fprintf(&file, "older:%s:write,read\n", writeToken)
	require.NoError(t, os.WriteFile(path, []byte(file.String()), 0o600))
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Server.Auth.TokenFile = path }})

	svc := receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService")
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		proc := "/" + string(svc.FullName()) + "/" + string(m.Name())
		need, ok := server.ScopeOf(proc)
		require.True(t, ok, proc)
		wantDenied := fmt.Sprintf(`needs the "%s" scope`, need)
		rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)

		for scope, tok := range scopeTokens {
			allowed := scope == need
			label := fmt.Sprintf("%s with a %s token", m.Name(), scope)
			if rule != nil {
				method, route, withBody := restRoute(rule)
				body := ""
				if withBody {
					body = "{}"
				}
				resp, got := restCall(t, tb.h1, tb.url, method, route, body, tok)
				if allowed {
					require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode, "REST %s %s: %s", label, route, got)
				} else {
					apierrtest.RefusedREST(t, resp.StatusCode, []byte(got), http.StatusForbidden, apierr.ScopeMissing, "REST %s %s", label, route)
					require.Equal(t, need.String(), apierr.InfoOfREST([]byte(got)).GetMetadata()["scope"], label)
					e := parseRESTError(t, []byte(got))
					require.Equal(t, 7, e.Code)
					require.Contains(t, e.Message, wantDenied, label)
				}
			}
			if m.IsStreamingServer() {
				continue // below, with the typed client
			}
			resp, got := restCall(t, tb.h1, tb.url, http.MethodPost, proc, "{}", tok)
			if allowed {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode, "Connect %s: %s", label, got)
			} else {
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "Connect %s: %s", label, got)
				require.Contains(t, got, `"code":"permission_denied"`)
				require.Contains(t, got, strings.ReplaceAll(wantDenied, `"`, `\"`), label)
				require.Contains(t, got, `"type":"google.rpc.ErrorInfo"`, label)
			}
			grpc := connect.NewClient[emptypb.Empty, emptypb.Empty](tb.h2c, tb.url+proc, connect.WithGRPC())
			req := connect.NewRequest(&emptypb.Empty{})
			req.Header().Set("Authorization", "Bearer "+tok)
			_, err := grpc.CallUnary(context.Background(), req)
			if allowed {
				require.NotContains(t, []connect.Code{connect.CodePermissionDenied, connect.CodeUnauthenticated}, connect.CodeOf(err), "gRPC %s: %v", label, err)
			} else {
				apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.ScopeMissing, "gRPC %s", label)
				require.ErrorContains(t, err, wantDenied)
			}
		}
		if rule != nil {
			method, route, _ := restRoute(rule)
			resp, got := restCall(t, tb.h1, tb.url, method, route, "", "")
			apierrtest.RefusedREST(t, resp.StatusCode, []byte(got), http.StatusUnauthorized, apierr.CredentialsMissing, "REST %s without a token", m.Name())
		}
	}

	// The watch stream, gRPC and server-sent events.
	for scope, tok := range scopeTokens {
		for name, c := range map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "connect": connect.WithProtoJSON()} {
			ctx, cancel := context.WithCancel(context.Background())
			req := connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"c1"}})
			req.Header().Set("Authorization", "Bearer "+tok)
			stream, err := tb.client(c).WatchChannels(ctx, req)
			require.NoError(t, err)
			stream.Receive()
			if scope == apiauth.ScopeWatch {
				require.NotEqual(t, connect.CodePermissionDenied, connect.CodeOf(stream.Err()), "%s watch with a %s token", name, scope)
			} else {
				apierrtest.Refused(t, stream.Err(), connect.CodePermissionDenied, apierr.ScopeMissing, "%s watch with a %s token", name, scope)
				require.ErrorContains(t, stream.Err(), `needs the "watch" scope`)
			}
			cancel()
			_ = stream.Close()
		}
		if scope != apiauth.ScopeWatch {
			resp, got := restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/channels:watch?channel_id=c1", "", tok)
			apierrtest.RefusedREST(t, resp.StatusCode, []byte(got), http.StatusForbidden, apierr.ScopeMissing, "SSE watch with a %s token", scope)
			require.Contains(t, parseRESTError(t, []byte(got)).Message, `needs the "watch" scope`)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tb.url+"/v1/channels:watch?channel_id=c1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+scopeTokens[apiauth.ScopeWatch])
	resp, err := tb.h1.Do(req)
	require.NoError(t, err)
	// (Not 200: this bundle has no watch hub, so 501 after the guard.)
	require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode, "SSE watch with a watch token")
	cancel()
	_ = resp.Body.Close()

	// A name:token line: everything but erase.
	const mark = `{"receipts": [{"user_id": "ann", "channel_id": "c1", "kind": "READ", "seq": 3}]}`
	resp, got := restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", mark, legacyToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	resp, got = restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/users/ann/read-state", "", legacyToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	resp, got = restCall(t, tb.h1, tb.url, http.MethodDelete, "/v1/users/ann", "", legacyToken)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(got), http.StatusForbidden, apierr.ScopeMissing)
	require.Contains(t, parseRESTError(t, []byte(got)).Message, `EraseUser needs the "erase" scope, which client token:legacy lacks (it holds mark,notify,read,watch)`)
	// The fast REST path refuses before writing.
	resp, got = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", mark, scopeTokens[apiauth.ScopeRead])
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(got), http.StatusForbidden, apierr.ScopeMissing)
	require.Equal(t, "mark", apierr.InfoOfREST([]byte(got)).GetMetadata()["scope"])
	// The tier that relays reads (mark) cannot move heads.
	resp, got = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/channels/c1/messages", `{"seq": 9, "sender_id": "ann"}`, scopeTokens[apiauth.ScopeMark])
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(got), http.StatusForbidden, apierr.ScopeMissing)
	require.Equal(t, "notify", apierr.InfoOfREST([]byte(got)).GetMetadata()["scope"])
	// A write line of an older file still marks and notifies.
	resp, got = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/channels/c1/messages", `{"seq": 9, "sender_id": "ann"}`, writeToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	resp, got = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", mark, writeToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	require.Positive(t, gatheredLabel(t, tb, "receipts_kafkagate_auth_forbidden_total", "erase"))
	require.Positive(t, gatheredLabel(t, tb, "receipts_kafkagate_auth_forbidden_total", "mark"))
	require.Positive(t, gatheredLabel(t, tb, "receipts_kafkagate_auth_forbidden_total", "notify"))
}
