package gate_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/tlstest"
)

const (
	tokenChat  = "chat-token-0123456789abcdef"
	tokenOther = "other-token-0123456789abcdef"
	tokenThird = "third-token-0123456789abcdef"
)

// tokenFile writes a token file naming three clients.
func tokenFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte("# test clients\nchat:"+tokenChat+"\nother:"+tokenOther+"\nthird:"+tokenThird+"\n"), 0o600))
	return path
}

// restCall sends a REST request with an optional bearer token.
func restCall(t testing.TB, c *http.Client, url, method, path, body, token string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url+path, r)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// markRead calls MarkRead with an optional bearer token.
func markRead(c receiptsv1connect.ReceiptServiceClient, token, user string, seq int64) error {
	req := connect.NewRequest(&receiptsv1.MarkRequest{UserId: user, ChannelId: "c1", Seq: seq})
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	_, err := c.MarkRead(context.Background(), req)
	return err
}

// TestAuthBearerTokens: missing, wrong and right tokens on REST, gRPC and
// Connect.
func TestAuthBearerTokens(t *testing.T) {
	t.Parallel()
	path := tokenFile(t)
	tb := setup(t, setupOpts{config: func(c *testConfig) { c.Server.Auth.TokenFile = path }})
	const mark = `{"receipts": [{"user_id": "ann", "channel_id": "c1", "kind": "READ", "seq": 3}]}`

	resp, body := restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", mark, "")
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusUnauthorized, apierr.CredentialsMissing)
	e := parseRESTError(t, []byte(body))
	require.Equal(t, 16, e.Code)
	require.Equal(t, `missing bearer token: send "Authorization: Bearer <token>"`, e.Message)
	require.Equal(t, `Bearer realm="receipts"`, resp.Header.Get("WWW-Authenticate"))

	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", mark, tokenChat+"x")
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusUnauthorized, apierr.CredentialsInvalid)
	require.Contains(t, body, "invalid bearer token")

	resp, body = restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/users/ann/read-state", "", "")
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusUnauthorized, apierr.CredentialsMissing, "reads are guarded too")

	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", mark, tokenChat)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"advanced":true`)

	for name, c := range map[string]receiptsv1connect.ReceiptServiceClient{
		"grpc":    tb.client(connect.WithGRPC()),
		"connect": tb.client(),
	} {
		err := markRead(c, "", "ann", 4)
		apierrtest.Refused(t, err, connect.CodeUnauthenticated, apierr.CredentialsMissing, name)
		require.ErrorContains(t, err, "missing bearer token", name)
		err = markRead(c, "not-a-token-0123456789", "ann", 4)
		apierrtest.Refused(t, err, connect.CodeUnauthenticated, apierr.CredentialsInvalid, name)
		require.ErrorContains(t, err, "invalid bearer token", name)
		require.NoError(t, markRead(c, tokenOther, "ann", 4), name)
	}
	// Connect JSON from curl, without the protocol header, gets the Connect
	// error shape.
	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/"+receiptsv1connect.ReceiptServiceName+"/MarkRead", `{"user_id":"ann","channel_id":"c1","seq":5}`, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, `"code":"unauthenticated"`)
	var connectErr struct {
		Details []struct{ Type string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &connectErr))
	require.Equal(t, "google.rpc.ErrorInfo", connectErr.Details[0].Type, "the Connect error carries the ErrorInfo: %s", body)

	require.Equal(t, 5.0, gatheredLabel(t, tb, "receipts_kafkagate_auth_rejected_total", "missing"))
	require.Equal(t, 3.0, gatheredLabel(t, tb, "receipts_kafkagate_auth_rejected_total", "invalid"))
}

// TestAuthMTLS: over TLS (h2 for gRPC, HTTP/1.1 for REST), a client
// certificate the CA signed authenticates; none gets a clear 401; one from
// another CA fails the handshake.
func TestAuthMTLS(t *testing.T) {
	t.Parallel()
	pki, stranger := tlstest.New(t), tlstest.New(t)
	tb := setup(t, setupOpts{config: func(c *testConfig) {
		c.Server.Auth.CertFile, c.Server.Auth.KeyFile, c.Server.Auth.ClientCAFile = pki.ServerCertFile, pki.ServerKeyFile, pki.CAFile
	}})
	url := "https://" + strings.TrimPrefix(tb.url, "http://")
	clientFor := func(certs []tls.Certificate, h2 bool) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.CAPool, Certificates: certs, MinVersion: tls.VersionTLS12}}
		if h2 {
			var p http.Protocols
			p.SetHTTP2(true)
			tr.Protocols = &p
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	withCert := []tls.Certificate{pki.ClientCert}

	grpc := receiptsv1connect.NewReceiptServiceClient(clientFor(withCert, true), url, connect.WithGRPC())
	require.NoError(t, markRead(grpc, "", "tess", 1))
	connectH1 := receiptsv1connect.NewReceiptServiceClient(clientFor(withCert, false), url)
	require.NoError(t, markRead(connectH1, "", "tess", 2))
	resp, body := restCall(t, clientFor(withCert, false), url, http.MethodGet, "/v1/users/tess/read-state", "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "HTTP/1.1", resp.Proto)
	require.Contains(t, body, `"seq":"2"`)

	resp, body = restCall(t, clientFor(nil, false), url, http.MethodGet, "/v1/users/tess/read-state", "", "")
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusUnauthorized, apierr.CredentialsMissing)
	require.Contains(t, body, "missing client certificate")
	err := markRead(receiptsv1connect.NewReceiptServiceClient(clientFor(nil, true), url, connect.WithGRPC()), "", "tess", 3)
	apierrtest.Refused(t, err, connect.CodeUnauthenticated, apierr.CredentialsMissing)

	err = markRead(receiptsv1connect.NewReceiptServiceClient(clientFor([]tls.Certificate{stranger.ClientCert}, true), url, connect.WithGRPC()), "", "tess", 3)
	// The server drops the handshake; the client sees it as Unavailable, or
	// as Canceled when its write of the request hits the closed connection
	// first. Either way the call never reached the API.
	require.Contains(t, []connect.Code{connect.CodeUnavailable, connect.CodeCanceled}, connect.CodeOf(err), "a certificate of another CA fails the handshake: %v", err)
	_, err = clientFor([]tls.Certificate{stranger.ClientCert}, false).Get(url + "/v1/users/tess/read-state")
	require.ErrorContains(t, err, "tls: ", "a certificate of another CA fails the handshake")

	// Plain HTTP to the TLS port is refused.
	resp, _ = restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/users/tess/read-state", "", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestRateLimitPerClient: each client has its own budget of events; a
// batch costs its items; over budget is 429 / ResourceExhausted with
// Retry-After.
func TestRateLimitPerClient(t *testing.T) {
	t.Parallel()
	// REST marks take the fast path or vanguard's; both charge a batch.
	for _, path := range []string{"fast", "vanguard"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			testRateLimitPerClient(t, path == "vanguard")
		})
	}
}

func testRateLimitPerClient(t *testing.T, fastRESTOff bool) {
	path := tokenFile(t)
	tb := setup(t, setupOpts{config: func(c *testConfig) {
		c.Server.Auth.TokenFile = path
		// A slow refill: nothing comes back within the test.
		c.Server.Auth.RateLimit, c.Server.Auth.RateLimitBurst, c.MaxBatchItems = 0.01, 10, 10
		c.Server.TranscodeAllREST = fastRESTOff
	}})

	batch := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"user_id": "rob", "channel_id": "c` + string(rune('a'+i)) + `", "kind": "READ", "seq": 1}`
		}
		return `{"receipts": [` + strings.Join(items, ",") + `]}`
	}

	resp, body := restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", batch(6), tokenChat)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	// 6 of 10 spent: a batch of 6 more is refused by its size.
	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", batch(6), tokenChat)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusTooManyRequests, apierr.RateLimited)
	require.Contains(t, body, "rate limit of 0.01 events/s (burst 10) for client token:chat exceeded")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	// The refused batch spent only its door charge (1): 3 remain.
	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", batch(3), tokenChat)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	// Empty now: every protocol is refused at the door.
	resp, body = restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/users/rob/read-state", "", tokenChat)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusTooManyRequests, apierr.RateLimited)
	require.Equal(t, 8, parseRESTError(t, []byte(body)).Code)
	retry := resp.Header.Get("Retry-After")
	require.Regexp(t, `^[1-9][0-9]*$`, retry)
	require.Equal(t, retry, apierr.InfoOfREST([]byte(body)).GetMetadata()["retry_after_seconds"])
	err := markRead(tb.client(connect.WithGRPC()), tokenChat, "rob", 2)
	apierrtest.Refused(t, err, connect.CodeResourceExhausted, apierr.RateLimited)
	cerr, ok := errors.AsType[*connect.Error](err)
	require.True(t, ok)
	require.NotEmpty(t, cerr.Meta().Get("Retry-After"), "gRPC carries Retry-After too")
	err = markRead(tb.client(), tokenChat, "rob", 2)
	apierrtest.Refused(t, err, connect.CodeResourceExhausted, apierr.RateLimited)

	// An oversized batch is refused by its validation, not by the limit,
	// and costs a whole burst.
	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", batch(11), tokenThird)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusBadRequest, apierr.BatchTooLarge)
	require.Contains(t, body, "limit is 10")
	apierrtest.Refused(t, markRead(tb.client(), tokenThird, "rob", 2), connect.CodeResourceExhausted, apierr.RateLimited)

	// Another client is not affected.
	require.NoError(t, markRead(tb.client(connect.WithGRPC()), tokenOther, "rob", 2))
	resp, body = restCall(t, tb.h1, tb.url, http.MethodPost, "/v1/receipts:mark", batch(7), tokenOther)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	require.Equal(t, 5.0, gathered(t, tb.reg, "receipts_kafkagate_rate_limited_total"))
	require.Equal(t, 3.0, gathered(t, tb.reg, "receipts_kafkagate_rate_limit_clients"))
}

// gatheredLabel reads a counter's child whose one label has value.
func gatheredLabel(t *testing.T, tb *testBundle, name, value string) float64 {
	t.Helper()
	mfs, err := tb.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{…=%q}", name, value)
	return 0
}
