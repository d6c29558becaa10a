package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
)

// streamer serves WatchChannels by the channel asked for: "late" sends an
// event and then fails, "hold" waits for the caller to go away, any other
// is refused at once.
type streamer struct {
	receiptsv1connect.UnimplementedReceiptServiceHandler
	holding chan struct{}
}

func (f streamer) WatchChannels(ctx context.Context, req *connect.Request[receiptsv1.WatchChannelsRequest], stream *connect.ServerStream[receiptsv1.WatchEvent]) error {
	switch req.Msg.GetChannelId()[0] {
	case "late":
		if err := stream.Send(&receiptsv1.WatchEvent{ResumeToken: "t1"}); err != nil {
			return err
		}
		return apierr.New(connect.CodeUnavailable, apierr.Unavailable, errors.New("shutting down"))
	case "hold":
		close(f.holding)
		<-ctx.Done()
		return ctx.Err()
	}
	return apierr.New(connect.CodeInvalidArgument, apierr.InvalidID, errors.New("bad channel"))
}

// ended notes that a stream's handler, callInfo's wrapping included,
// returned.
type ended chan struct{}

func (e ended) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (e ended) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (e ended) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		defer func() { e <- struct{}{} }()
		return next(ctx, conn)
	}
}

// TestCallInfoOnStreams: a server stream's refusal, at once or after
// events, carries the RequestInfo of the caller's X-Request-Id beside its
// ErrorInfo and is logged like a unary refusal; a stream its caller left
// is not logged as refused.
func TestCallInfoOnStreams(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	s := &Server{log: zap.New(core)}
	done := make(ended, 1)
	fake := streamer{holding: make(chan struct{})}
	path, h := receiptsv1connect.NewReceiptServiceHandler(fake, connect.WithInterceptors(done, s.callInfo()))
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewUnstartedServer(s.traceHTTP(mux))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	t.Cleanup(hc.CloseIdleConnections)

	watch := func(client receiptsv1connect.ReceiptServiceClient, ctx context.Context, channel, requestID string) *connect.ServerStreamForClient[receiptsv1.WatchEvent] {
		req := connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{channel}})
		if requestID != "" {
			req.Header().Set(apierr.RequestIDHeader, requestID)
		}
		stream, err := client.WatchChannels(ctx, req)
		require.NoError(t, err)
		return stream
	}
	for _, proto := range []struct {
		name string
		opts []connect.ClientOption
	}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}} {
		client := receiptsv1connect.NewReceiptServiceClient(hc, srv.URL, proto.opts...)
		ctx := context.Background()

		stream := watch(client, ctx, "bad", "req-"+proto.name)
		require.False(t, stream.Receive())
		<-done
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(stream.Err()), "%s: %v", proto.name, stream.Err())
		require.Equal(t, apierr.InvalidID, apierr.ReasonOf(stream.Err()), "%s: the ErrorInfo stays", proto.name)
		require.Equal(t, "req-"+proto.name, apierr.RequestInfoOf(stream.Err()).GetRequestId(), "%s", proto.name)
		require.Len(t, logs.FilterMessage("call refused").FilterField(zap.String("request_id", "req-"+proto.name)).
			FilterField(zap.String("rpc", "WatchChannels")).FilterField(zap.String("reason", string(apierr.InvalidID))).All(), 1, proto.name)

		// Refused after an event.
		stream = watch(client, ctx, "late", "late-"+proto.name)
		require.True(t, stream.Receive(), "%s: %v", proto.name, stream.Err())
		require.False(t, stream.Receive())
		<-done
		require.Equal(t, connect.CodeUnavailable, connect.CodeOf(stream.Err()), "%s: %v", proto.name, stream.Err())
		require.Equal(t, "late-"+proto.name, apierr.RequestInfoOf(stream.Err()).GetRequestId(), "%s", proto.name)
		require.Len(t, logs.FilterMessage("call refused").FilterField(zap.String("request_id", "late-"+proto.name)).All(), 1, proto.name)

		// No request id and no trace: no RequestInfo, still logged.
		stream = watch(client, ctx, "bad", "")
		require.False(t, stream.Receive())
		<-done
		require.Nil(t, apierr.RequestInfoOf(stream.Err()), proto.name)
	}
	require.Len(t, logs.FilterMessage("call refused").FilterField(zap.String("request_id", "")).All(), 2)

	// The caller leaves a stream: it ended, nobody was refused.
	client := receiptsv1connect.NewReceiptServiceClient(hc, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-fake.holding; cancel() }()
	req := connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"hold"}})
	req.Header().Set(apierr.RequestIDHeader, "left")
	if stream, err := client.WatchChannels(ctx, req); err == nil {
		require.False(t, stream.Receive())
	}
	<-done
	require.Empty(t, logs.FilterField(zap.String("request_id", "left")).All())
}
