package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/jwttest"
	"github.com/readstate/receipts/pkg/kafkatest"
	"github.com/readstate/receipts/pkg/pgtest"
	"github.com/readstate/receipts/pkg/redistest"
)

// TestRefusesAnOpenNonLoopbackAPI: kafkagate does not serve a listener on
// every interface without authentication unless told to.
func TestRefusesAnOpenNonLoopbackAPI(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{
		"--listen", "0.0.0.0:0", "--admin-addr", freeAddr(t), "--brokers", "127.0.0.1:1",
		"--pg-url", pgtest.URL(), "--log-level", "error", "--spool-dir", "", "--migrate=false",
	}, io.Discard)
	require.ErrorContains(t, err, "the listener 0.0.0.0:0 is not loopback and no authentication is configured")
	require.ErrorContains(t, err, "--insecure-allow-unauthenticated")
}

// TestTokenFileFromEnvironment: RECEIPTS_AUTH_TOKEN_FILE (the chart's
// way) turns on bearer tokens, RECEIPTS_AUTH_JWT_HS256_KEY_FILE end-user
// tokens; /readyz and /metrics on the admin port stay open.
func TestTokenFileFromEnvironment(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("chat:chat-token-0123456789\n"), 0o600))
	t.Setenv("RECEIPTS_AUTH_TOKEN_FILE", tokens)
	iss := jwttest.New(t)
	t.Setenv("RECEIPTS_AUTH_JWT_HS256_KEY_FILE", iss.HS256KeyFile)
	broker := kafkatest.New(t)
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t, rdb)
	schema := pgtest.NewSchema(t)
	listen, adminAddr := freeAddr(t), freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", listen, "--admin-addr", adminAddr,
			"--brokers", strings.Join(broker.Seeds, ","), "--topic", broker.Topic,
			"--redis-prefix", prefix, "--pg-url", schema.URL, "--log-level", "warn", "--spool-dir", "",
		}, io.Discard)
	}()
	hc := &http.Client{Timeout: 10 * time.Second}
	require.Eventually(t, func() bool {
		resp, err := hc.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "admin /readyz never became ready (and must not need a token)")

	post := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/users/u1/channels/c1/read", strings.NewReader(`{"seq": 4}`))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("")
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusUnauthorized, apierr.CredentialsMissing)
	code, body = post("chat-token-0123456789")
	require.Equal(t, http.StatusOK, code, body)
	code, body = post(iss.HS256(t, jwttest.Claims("u1")))
	require.Equal(t, http.StatusOK, code, "u1's own mark: %s", body)
	code, body = post(iss.HS256(t, jwttest.Claims("u2")))
	apierrtest.RefusedREST(t, code, []byte(body), http.StatusForbidden, apierr.NotYourUser)

	resp, err := hc.Get("http://" + adminAddr + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(b), `receipts_kafkagate_auth_rejected_total{reason="missing"} 1`)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("kafkagate did not stop after cancellation")
	}
}
