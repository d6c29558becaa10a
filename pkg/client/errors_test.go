package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/api/retries"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/client"
)

// TestErrorHelpers: the reason, Retry-After (header first, then the
// ErrorInfo) and retryability of refusals as the gateway builds them.
func TestErrorHelpers(t *testing.T) {
	t.Parallel()
	headBehind := apierr.New(connect.CodeAborted, apierr.HeadBehind, errors.New("seq beyond head"), apierr.RetryAfter(time.Second))
	require.Equal(t, "HEAD_BEHIND", client.Reason(headBehind))
	require.Equal(t, time.Second, client.RetryAfter(headBehind))
	require.True(t, client.IsRetryable(headBehind))

	infoOnly := apierr.New(connect.CodeUnavailable, apierr.Unavailable, errors.New("down"), apierr.RetryAfter(3*time.Second))
	infoOnly.Meta().Del("Retry-After")
	require.Equal(t, 3*time.Second, client.RetryAfter(infoOnly))
	require.True(t, client.IsRetryable(fmtWrap(infoOnly)), "wrapped errors are read too")

	for _, tc := range []struct {
		code   connect.Code
		reason apierr.Reason
		meta   []apierr.Meta
		want   bool
	}{
		{connect.CodeResourceExhausted, apierr.RateLimited, nil, true},
		{connect.CodeResourceExhausted, apierr.BodyTooLarge, nil, false},
		{connect.CodeResourceExhausted, apierr.StreamLimit, nil, false},
		{connect.CodeResourceExhausted, apierr.StreamLimit, []apierr.Meta{apierr.RetryAfter(5 * time.Second)}, true},
		{connect.CodeAborted, "OTHER", nil, false},
		{connect.CodeInvalidArgument, apierr.InvalidSeq, nil, false},
		{connect.CodePermissionDenied, apierr.ScopeMissing, nil, false},
		{connect.CodeUnauthenticated, apierr.CredentialsMissing, nil, false},
		{connect.CodeNotFound, "", nil, false},
		{connect.CodeFailedPrecondition, apierr.EpochLimit, nil, false},
		{connect.CodeDeadlineExceeded, apierr.DeadlineExceeded, nil, false},
	} {
		err := apierr.New(tc.code, tc.reason, errors.New("x"), tc.meta...)
		require.Equal(t, tc.want, client.IsRetryable(err), "%s %s", tc.code, tc.reason)
	}
	require.False(t, client.IsRetryable(nil))
	require.Zero(t, client.RetryAfter(errors.New("plain")))
	require.Empty(t, client.Reason(errors.New("plain")))

	// A call that is not idempotent is retried on refusals given before
	// any write only.
	unread := receiptsv1connect.ReceiptServiceMarkUnreadProcedure
	require.True(t, client.Retried(unread, headBehind))
	require.False(t, client.Retried(unread, infoOnly))
	require.True(t, client.Retried(receiptsv1connect.ReceiptServiceMarkReadProcedure, infoOnly))
}

func fmtWrap(err error) error { return errors.Join(errors.New("calling"), err) }

// TestRetriedFollowsTheTable: for every procedure of the service, a
// failure after a possible write (Unavailable) is retried exactly when
// the clients' one table (api/retries/retries.json) says blind, and a
// refusal before any write (RATE_LIMITED) always is. The TypeScript
// client's test holds it to the same table.
func TestRetriedFollowsTheTable(t *testing.T) {
	t.Parallel()
	afterWrite := apierr.New(connect.CodeUnavailable, apierr.Unavailable, errors.New("kafka down"))
	beforeWrite := apierr.New(connect.CodeResourceExhausted, apierr.RateLimited, errors.New("slow down"))
	svc := receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService")
	for i := range svc.Methods().Len() {
		m := svc.Methods().Get(i)
		proc := "/" + string(svc.FullName()) + "/" + string(m.Name())
		blind := retries.Of(proc) == retries.Blind
		require.Equal(t, blind, client.Retried(proc, afterWrite), proc)
		require.True(t, client.Retried(proc, beforeWrite), proc)
	}
	for _, proc := range []string{
		receiptsv1connect.ReceiptServiceFollowThreadProcedure, receiptsv1connect.ReceiptServiceUnfollowThreadProcedure,
		receiptsv1connect.ReceiptServiceMarkThreadUnreadProcedure, receiptsv1connect.ReceiptServiceMarkUnreadProcedure,
	} {
		require.False(t, client.Retried(proc, afterWrite), "%s is never repeated blindly", proc)
	}
}

// TestRetriesUnopenedConnection: a connection that cannot be opened sent
// nothing, so even mark-unread is retried, up to MaxAttempts.
func TestRetriesUnopenedConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cnt := &counter{}
	c, err := client.New("http://"+addr, h2c(t), client.Config{
		Retry:          client.RetryPolicy{MaxAttempts: 3, Backoff: backoff.Config{Base: time.Millisecond}},
		ConnectOptions: []connect.ClientOption{connect.WithInterceptors(cnt)},
	})
	require.NoError(t, err)
	_, err = c.MarkUnread(context.Background(), connect.NewRequest(&receiptsv1.MarkUnreadRequest{UserId: "alice", ChannelId: "general", Seq: 2}))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
	require.Equal(t, 3, cnt.get("MarkUnread"))

	// A canceled caller stops the waits and still sees the last refusal.
	ctx, cancel := context.WithCancel(context.Background())
	c2, err := client.New("http://"+addr, h2c(t), client.Config{Retry: client.RetryPolicy{
		MaxAttempts: 3, Backoff: backoff.Config{Base: time.Hour, Cap: time.Hour},
		OnRetry: func(client.Retry) { cancel() },
	}})
	require.NoError(t, err)
	_, err = c2.GetTicks(ctx, connect.NewRequest(&receiptsv1.GetTicksRequest{ChannelId: "general"}))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err))
}

// TestNewRejectsBadConfig: a bad base URL or protocol fails at once.
func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := client.New("127.0.0.1:8080", nil, client.Config{})
	require.ErrorContains(t, err, "base URL")
	_, err = client.New("http://127.0.0.1:8080", nil, client.Config{Protocol: 7, Retry: client.RetryPolicy{MaxAttempts: -1}})
	require.ErrorContains(t, err, "Protocol")
	require.ErrorContains(t, err, "MaxAttempts")
}
