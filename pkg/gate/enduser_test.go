package gate_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
	"github.com/readstate/receipts/pkg/jwttest"
)

const serverToken = "chat-server-token-0123456789"

// endUserBundle serves a gate that takes the server token (every default
// scope) and the issuer's end-user tokens (HS256 key file, RS256 and
// ES256 from its JWKS file), with a watch hub and quick heartbeats.
func endUserBundle(t testing.TB, iss *jwttest.Issuer, edit func(*testConfig)) (*testBundle, string) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("chat:"+serverToken+"\n"), 0o600))
	tb := setup(t, setupOpts{config: func(c *testConfig) {
		c.Server.Auth.TokenFile = tokens
		c.Server.Auth.JWTHS256KeyFile, c.Server.Auth.JWKSFile, c.Server.Auth.JWTAudience = iss.HS256KeyFile, iss.JWKSFile, jwttest.Audience
		c.Server.WatchHeartbeat = 50 * time.Millisecond
		if edit != nil {
			edit(c)
		}
	}})
	return tb, tb.url
}

// seedChannels makes "ca" a channel of alice and bob and "cb" one of bob
// alone (heads 5 and 3), as the chat backend would, with the server
// token.
func seedChannels(t *testing.T, tb *testBundle, base string) {
	t.Helper()
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/channels/ca/members/alice", `{"seq": 0}`},
		{http.MethodPut, "/v1/channels/ca/members/bob", `{"seq": 0}`},
		{http.MethodPut, "/v1/channels/cb/members/bob", `{"seq": 0}`},
		{http.MethodPost, "/v1/channels/ca/messages", `{"seq": 5, "sender_id": "carol"}`},
		{http.MethodPost, "/v1/channels/cb/messages", `{"seq": 3, "sender_id": "carol"}`},
	} {
		resp, body := restCall(t, tb.h1, base, c.method, c.path, c.body, serverToken)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
	}
}

// TestEndUserTokenOwnUserOnly: alice's end-user token (HS256, RS256 or
// ES256) reads and marks her own state and watches and reads receipts of
// her channels, on REST (fast path and transcoded), Connect and gRPC; it
// is refused (403, with the reason and the missing right) bob's inbox, a
// mark for bob, a notice, a delete, a join, an erasure, and watching or
// reading receipts of a channel she is not in; an expired or wrongly
// signed token is 401.
func TestEndUserTokenOwnUserOnly(t *testing.T) {
	t.Parallel()
	iss, stranger := jwttest.New(t), jwttest.New(t)
	// Three tokens of alice's run the same calls: a budget for all.
	tb, _ := endUserBundle(t, iss, func(c *testConfig) { c.Server.Auth.UserRateLimit, c.Server.Auth.UserRateLimitBurst = 1000, 1000 })
	base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
	seedChannels(t, tb, base)

	for alg, alice := range map[string]string{
		"HS256": iss.HS256(t, jwttest.Claims("alice")),
		"RS256": iss.RS256(t, jwttest.Claims("alice")),
		"ES256": iss.ES256(t, jwttest.Claims("alice")),
	} {
		t.Run(alg, func(t *testing.T) {
			ownCalls(t, tb, base, alice)
			refusedCalls(t, tb, base, alice)
			watches(t, tb, base, alice)
		})
	}

	// 401: expired, or signed by another key (on the first replica, whose
	// metrics tb has).
	expired := func(c jwt.MapClaims) jwt.MapClaims { c["exp"] = time.Now().Add(-time.Hour).Unix(); return c }
	for name, c := range map[string]struct {
		token  string
		reason apierr.Reason
	}{
		"HS256 expired":        {iss.HS256(t, expired(jwttest.Claims("alice"))), apierr.CredentialsExpired},
		"ES256 expired":        {iss.ES256(t, expired(jwttest.Claims("alice"))), apierr.CredentialsExpired},
		"HS256 of another key": {stranger.HS256(t, jwttest.Claims("alice")), apierr.CredentialsInvalid},
		"RS256 of another key": {stranger.RS256(t, jwttest.Claims("alice")), apierr.CredentialsInvalid},
		"ES256 of another key": {stranger.ES256(t, jwttest.Claims("alice")), apierr.CredentialsInvalid},
	} {
		resp, body := restCall(t, tb.h1, tb.url, http.MethodGet, "/v1/users/alice/inbox", "", c.token)
		apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusUnauthorized, c.reason, "REST %s", name)
		require.Equal(t, `Bearer realm="receipts"`, resp.Header.Get("WWW-Authenticate"))
		for proto, opt := range map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "connect": connect.WithProtoJSON()} {
			req := connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "ca", Seq: 1})
			req.Header().Set("Authorization", "Bearer "+c.token)
			_, err := tb.client(opt).MarkRead(context.Background(), req)
			apierrtest.Refused(t, err, connect.CodeUnauthenticated, c.reason, "%s %s", proto, name)
		}
	}
	require.Positive(t, gatheredLabel(t, tb, "receipts_kafkagate_auth_rejected_total", "expired"))
}

// ownCalls: what alice's token may do, all of it answered.
func ownCalls(t *testing.T, tb *testBundle, base, alice string) {
	t.Helper()
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/users/alice/channels/ca/read", `{"seq": 2}`},      // fast path
		{http.MethodPost, "/v1/users/alice/channels/ca/delivered", `{"seq": 3}`}, // fast path
		{http.MethodPost, "/v1/receipts:mark", `{"receipts": [{"user_id": "alice", "channel_id": "ca", "kind": "READ", "seq": 3}]}`},
		{http.MethodPost, "/v1/users/alice/channels/ca/unread", `{"seq": 3}`},
		{http.MethodPost, "/v1/users/alice/read-all", `{}`},
		{http.MethodGet, "/v1/users/alice/read-state", ""},
		{http.MethodGet, "/v1/users/alice/unread", ""}, // fast path
		{http.MethodGet, "/v1/users/alice/unread?channel_id=ca", ""},
		{http.MethodGet, "/v1/users/alice/inbox", ""},   // fast path
		{http.MethodGet, "/v1/users/alice/threads", ""}, // fast path
		{http.MethodGet, "/v1/users/alice/settings", ""},
		{http.MethodPut, "/v1/users/alice/settings", `{"share_read_receipts": true}`},
		{http.MethodPut, "/v1/users/alice/channels/ca/notifications", `{"level": "mentions"}`},
		{http.MethodGet, "/v1/channels/ca", ""},
		{http.MethodGet, "/v1/channels/ca/ticks", ""},
		{http.MethodGet, "/v1/channels/ca/messages/2/receipts", ""},
		{http.MethodPost, "/v1/receipts:lookup", `{"messages": [{"channel_id": "ca", "seq": 2}], "badge_user_ids": ["alice"]}`},
	} {
		resp, body := restCall(t, tb.h1, base, c.method, c.path, c.body, alice)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
	}
	for proto, opt := range map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "connect": connect.WithProtoJSON()} {
		cl := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, opt)
		req := connect.NewRequest(&receiptsv1.GetInboxRequest{UserId: "alice"})
		req.Header().Set("Authorization", "Bearer "+alice)
		_, err := cl.GetInbox(context.Background(), req)
		require.NoError(t, err, proto)
		tr := connect.NewRequest(&receiptsv1.GetTicksRequest{ChannelId: "ca"})
		tr.Header().Set("Authorization", "Bearer "+alice)
		_, err = cl.GetTicks(context.Background(), tr)
		require.NoError(t, err, proto)
	}
}

// refusedCalls: what alice's token may not do, each refused with its
// reason, the offending field and the right it lacks, and nothing
// written.
func refusedCalls(t *testing.T, tb *testBundle, base, alice string) {
	t.Helper()
	for _, c := range []struct {
		method, path, body string
		reason             apierr.Reason
		field, scope       string
	}{
		{http.MethodGet, "/v1/users/bob/inbox", "", apierr.NotYourUser, "user_id", "read"},
		{http.MethodGet, "/v1/users/bob/unread", "", apierr.NotYourUser, "user_id", "read"},
		{http.MethodGet, "/v1/users/bob/read-state", "", apierr.NotYourUser, "user_id", "read"},
		{http.MethodGet, "/v1/users/bob/settings", "", apierr.NotYourUser, "user_id", "read"},
		{http.MethodPost, "/v1/users/bob/channels/ca/read", `{"seq": 5}`, apierr.NotYourUser, "user_id", "mark"},
		{http.MethodPost, "/v1/users/bob/channels/ca/unread", `{"seq": 1}`, apierr.NotYourUser, "user_id", "mark"},
		{http.MethodPost, "/v1/receipts:mark", `{"receipts": [{"user_id": "alice", "channel_id": "ca", "kind": "READ", "seq": 4}, {"user_id": "bob", "channel_id": "ca", "kind": "READ", "seq": 5}]}`, apierr.NotYourUser, "receipts[1].user_id", "mark"},
		{http.MethodPut, "/v1/users/bob/settings", `{"share_read_receipts": false}`, apierr.NotYourUser, "user_id", "mark"},
		{http.MethodPost, "/v1/receipts:lookup", `{"badge_user_ids": ["alice", "bob"]}`, apierr.NotYourUser, "badge_user_ids[1]", "read"},
		{http.MethodPost, "/v1/channels/ca/messages", `{"seq": 9, "sender_id": "alice"}`, apierr.ScopeMissing, "", "notify"},
		{http.MethodPost, "/v1/messages:notify", `{"notices": [{"channel_id": "ca", "seq": 9, "sender_id": "alice"}]}`, apierr.ScopeMissing, "", "notify"},
		{http.MethodDelete, "/v1/channels/ca/messages/1", "", apierr.ScopeMissing, "", "notify"},
		{http.MethodPut, "/v1/channels/cb/members/alice", `{}`, apierr.ScopeMissing, "", "notify"},
		{http.MethodDelete, "/v1/channels/ca/members/alice", "", apierr.ScopeMissing, "", "notify"},
		{http.MethodDelete, "/v1/users/alice", "", apierr.ScopeMissing, "", "erase"},
		{http.MethodGet, "/v1/channels/cb", "", apierr.NotAMember, "channel_id", "read"},
		{http.MethodGet, "/v1/channels/cb/ticks", "", apierr.NotAMember, "channel_id", "read"},
		{http.MethodGet, "/v1/channels/cb/messages/1/receipts", "", apierr.NotAMember, "channel_id", "read"},
		{http.MethodGet, "/v1/channels/nobody/ticks", "", apierr.NotAMember, "channel_id", "read"},
		{http.MethodPost, "/v1/receipts:lookup", `{"messages": [{"channel_id": "ca", "seq": 1}, {"channel_id": "cb", "seq": 1}]}`, apierr.NotAMember, "messages[1].channel_id", "read"},
	} {
		resp, body := restCall(t, tb.h1, base, c.method, c.path, c.body, alice)
		label := c.method + " " + c.path
		apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusForbidden, c.reason, label)
		md := apierr.InfoOfREST([]byte(body)).GetMetadata()
		require.Equal(t, c.scope, md["scope"], "%s names the right it lacks: %s", label, body)
		require.Equal(t, c.field, md["field"], label)
	}
	// Nothing of bob's moved, and no notice landed.
	resp, body := restCall(t, tb.h1, base, http.MethodGet, "/v1/users/bob/read-state?channel_id=ca", "", serverToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, `"seq":"5"`, "bob's cursor in ca is where the join put it")
	resp, body = restCall(t, tb.h1, base, http.MethodGet, "/v1/channels/ca", "", serverToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"seq":"5"`, "the head of ca is the server's")

	for proto, opt := range map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "connect": connect.WithProtoJSON()} {
		cl := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, opt)
		req := connect.NewRequest(&receiptsv1.GetInboxRequest{UserId: "bob"})
		req.Header().Set("Authorization", "Bearer "+alice)
		_, err := cl.GetInbox(context.Background(), req)
		apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.NotYourUser, proto)
		require.ErrorContains(t, err, `GetInbox of user "bob": the end-user token of "alice" acts on its own user only`)
		mr := connect.NewRequest(&receiptsv1.MarkRequest{UserId: "bob", ChannelId: "ca", Seq: 5})
		mr.Header().Set("Authorization", "Bearer "+alice)
		_, err = cl.MarkRead(context.Background(), mr)
		apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.NotYourUser, proto)
		nr := connect.NewRequest(&receiptsv1.NotifyMessageRequest{ChannelId: "ca", Seq: 9, SenderId: "alice"})
		nr.Header().Set("Authorization", "Bearer "+alice)
		_, err = cl.NotifyMessage(context.Background(), nr)
		apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.ScopeMissing, proto)
		require.ErrorContains(t, err, `NotifyMessage needs the "notify" scope, which client user:alice lacks`)
		jr := connect.NewRequest(&receiptsv1.JoinChannelRequest{ChannelId: "cb", UserId: "alice"})
		jr.Header().Set("Authorization", "Bearer "+alice)
		_, err = cl.JoinChannel(context.Background(), jr)
		apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.ScopeMissing, proto)
		dr := connect.NewRequest(&receiptsv1.DeleteMessageRequest{ChannelId: "ca", Seq: 1})
		dr.Header().Set("Authorization", "Bearer "+alice)
		_, err = cl.DeleteMessage(context.Background(), dr)
		apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.ScopeMissing, proto)
		rr := connect.NewRequest(&receiptsv1.GetMessageReceiptsRequest{ChannelId: "cb", Seq: 1})
		rr.Header().Set("Authorization", "Bearer "+alice)
		_, err = cl.GetMessageReceipts(context.Background(), rr)
		apierrtest.Refused(t, err, connect.CodePermissionDenied, apierr.NotAMember, proto)
		require.ErrorContains(t, err, `user "alice" is not a member of it`)
	}
}

// watches: alice watches her channel on every protocol, and is refused a
// watch that names a channel she is not in.
func watches(t *testing.T, tb *testBundle, base, alice string) {
	t.Helper()
	for proto, opt := range map[string]connect.ClientOption{"grpc": connect.WithGRPC(), "connect": connect.WithProtoJSON()} {
		cl := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, opt)
		for _, c := range []struct {
			channels []string
			refused  bool
		}{{[]string{"ca"}, false}, {[]string{"ca", "cb"}, true}} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req := connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: c.channels})
			req.Header().Set("Authorization", "Bearer "+alice)
			stream, err := cl.WatchChannels(ctx, req)
			require.NoError(t, err)
			got := stream.Receive()
			if c.refused {
				require.False(t, got)
				apierrtest.Refused(t, stream.Err(), connect.CodePermissionDenied, apierr.NotAMember, "%s watch %v", proto, c.channels)
				require.Equal(t, "channel_id[1]", apierr.InfoOf(stream.Err()).GetMetadata()["field"])
				require.Equal(t, "watch", apierr.InfoOf(stream.Err()).GetMetadata()["scope"])
			} else {
				require.True(t, got, "%s watch %v: %v", proto, c.channels, stream.Err())
			}
			cancel()
			_ = stream.Close()
		}
	}
	resp, body := restCall(t, tb.h1, base, http.MethodGet, "/v1/channels:watch?channel_id=ca&channel_id=cb", "", alice)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusForbidden, apierr.NotAMember, "SSE")
	require.Equal(t, "channel_id[1]", apierr.InfoOfREST([]byte(body)).GetMetadata()["field"])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/channels:watch?channel_id=ca", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+alice)
	sse, err := tb.h1.Do(req)
	require.NoError(t, err)
	defer sse.Body.Close()
	require.Equal(t, http.StatusOK, sse.StatusCode)
	line, err := bufio.NewReader(sse.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ": watching 1 channels\n", line)
}

// TestEndUserRateLimitByDefault: without --rate-limit, end-user tokens
// are limited per user, server tokens not at all.
func TestEndUserRateLimitByDefault(t *testing.T) {
	t.Parallel()
	iss := jwttest.New(t)
	tb, base := endUserBundle(t, iss, func(c *testConfig) { c.Server.Auth.UserRateLimit, c.Server.Auth.UserRateLimitBurst = 0.01, 5 })
	alice := iss.HS256(t, jwttest.Claims("alice"))
	for range 5 {
		resp, body := restCall(t, tb.h1, base, http.MethodGet, "/v1/users/alice/unread", "", alice)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	resp, body := restCall(t, tb.h1, base, http.MethodGet, "/v1/users/alice/unread", "", alice)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusTooManyRequests, apierr.RateLimited)
	// A batch costs its items, for end-users too.
	bob := iss.HS256(t, jwttest.Claims("bob"))
	items := make([]string, 5)
	for i := range items {
		items[i] = fmt.Sprintf(`{"user_id": "bob", "channel_id": "c%d", "kind": "READ", "seq": 1}`, i)
	}
	resp, body = restCall(t, tb.h1, base, http.MethodPost, "/v1/receipts:mark", `{"receipts": [`+strings.Join(items, ",")+`]}`, bob)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = restCall(t, tb.h1, base, http.MethodGet, "/v1/users/bob/unread", "", bob)
	apierrtest.RefusedREST(t, resp.StatusCode, []byte(body), http.StatusTooManyRequests, apierr.RateLimited)
	for range 20 {
		resp, body = restCall(t, tb.h1, base, http.MethodGet, "/v1/users/alice/unread", "", serverToken)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
}

// BenchmarkMarkByToken: a mark through the gateway (the fast REST path,
// real Redis and kfake) with a server token and with end-user tokens: what
// the end-user check (JWT, own user) adds to the hot path.
func BenchmarkMarkByToken(b *testing.B) {
	iss := jwttest.New(b)
	tb, base := endUserBundle(b, iss, func(c *testConfig) {
		c.Logger, c.Server.Logger, c.Durable.Logger = zap.NewNop(), zap.NewNop(), zap.NewNop()
		c.Server.Auth.UserRateLimit = -1 // measure the check, not the limiter's refusals
	})
	for _, c := range []struct{ name, token string }{
		{"server-token", serverToken},
		{"jwt-hs256", iss.HS256(b, jwttest.Claims("u1"))},
		{"jwt-es256", iss.ES256(b, jwttest.Claims("u1"))},
	} {
		b.Run(c.name, func(b *testing.B) {
			ch := "bench-" + c.name
			seq := 0
			// The channel's head is far ahead: every mark advances.
			resp, body := restCall(b, tb.h1, base, http.MethodPost, "/v1/channels/"+ch+"/messages", `{"seq": 100000000, "sender_id": "u0"}`, serverToken)
			require.Equal(b, http.StatusOK, resp.StatusCode, body)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				resp, body := restCall(b, tb.h1, base, http.MethodPost, "/v1/users/u1/channels/"+ch+"/read", fmt.Sprintf(`{"seq": %d}`, seq), c.token)
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%d: %s", resp.StatusCode, body)
				}
			}
		})
	}
}
