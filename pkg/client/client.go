// Package client is the Go client of the receipts API for upstream chat
// servers: the generated connect-go client of receipts.v1 (Connect, gRPC
// or gRPC-Web) with the gateway's bearer token on every call, retries
// with backoff where a retry is safe, helpers for the refusals' ErrorInfo
// (Reason, IsRetryable, RetryAfter), an iterator over paged lists
// (Paginate, ChannelMembers), a watch stream that resumes by itself
// (Watch), and a summary of where marks are durable (Summarize).
//
// Every RPC is a method of Client (the embedded
// receiptsv1connect.ReceiptServiceClient), retried as retry.go says:
//
//	c, err := client.New("https://receipts.internal:8080", http.DefaultClient, client.Config{Token: token})
//	res, err := c.MarkRead(ctx, connect.NewRequest(&receiptsv1.MarkRequest{UserId: "alice", ChannelId: "general", Seq: 42}))
//	switch client.Reason(err) { … }
package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
)

// Protocol is the wire protocol of a Client.
type Protocol int

const (
	// ProtocolConnect is connect-go's own protocol (HTTP/1.1 or HTTP/2).
	ProtocolConnect Protocol = iota
	// ProtocolGRPC needs HTTP/2: over plain http, an http.Client whose
	// transport speaks h2c (http.Protocols.SetUnencryptedHTTP2).
	ProtocolGRPC
	// ProtocolGRPCWeb works over HTTP/1.1 too.
	ProtocolGRPCWeb
)

// Config configures a Client. Its zero value is a Connect client without
// credentials and with the default retry policy.
type Config struct {
	// Token is sent as "Authorization: Bearer <token>" on every call (the
	// gateway's token file, pkg/apiauth). Empty: none (an open gateway,
	// or one that authenticates by client certificate).
	Token string
	// Protocol defaults to ProtocolConnect.
	Protocol Protocol
	// Retry is the retry policy of unary calls and of a watch stream's
	// reconnects (retry.go).
	Retry RetryPolicy
	// ConnectOptions are appended to the generated client's options
	// (compression, more interceptors, read limits).
	ConnectOptions []connect.ClientOption
}

func (c Config) validate() error {
	var errs []error
	if c.Protocol < ProtocolConnect || c.Protocol > ProtocolGRPCWeb {
		errs = append(errs, fmt.Errorf("Protocol: unknown protocol %d", c.Protocol))
	}
	if c.Retry.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("Retry.MaxAttempts: must be >= 0, got %d", c.Retry.MaxAttempts))
	}
	return errors.Join(errs...)
}

// Client calls the receipts API. It is safe for concurrent use.
type Client struct {
	// ReceiptServiceClient is the generated client with the token and the
	// retries on: each RPC as connect-go spells it.
	receiptsv1connect.ReceiptServiceClient

	// raw is the same client without the retry interceptor, for watch
	// streams (which retry on their own, Watch).
	raw receiptsv1connect.ReceiptServiceClient
	cfg Config
}

// New returns a client of the gateway at baseURL (scheme, host and port:
// "http://127.0.0.1:8080") over hc; a nil hc is http.DefaultClient.
func New(baseURL string, hc connect.HTTPClient, cfg Config) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("configuring receipts client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring receipts client: %w", err)
	}
	cfg.Retry = cfg.Retry.withDefaults()
	if hc == nil {
		hc = http.DefaultClient
	}
	var opts []connect.ClientOption
	switch cfg.Protocol {
	case ProtocolGRPC:
		opts = append(opts, connect.WithGRPC())
	case ProtocolGRPCWeb:
		opts = append(opts, connect.WithGRPCWeb())
	}
	// The first interceptor is the outermost: the retrier wraps the
	// caller's (each attempt passes through them), and the token is set
	// innermost, just before the wire.
	auth := connect.WithInterceptors(bearer(cfg.Token))
	retrying := []connect.ClientOption{connect.WithInterceptors(retrier{cfg.Retry})}
	c := &Client{cfg: cfg}
	c.raw = receiptsv1connect.NewReceiptServiceClient(hc, baseURL, slices.Concat(opts, cfg.ConnectOptions, []connect.ClientOption{auth})...)
	c.ReceiptServiceClient = receiptsv1connect.NewReceiptServiceClient(hc, baseURL,
		slices.Concat(opts, retrying, cfg.ConnectOptions, []connect.ClientOption{auth})...)
	return c, nil
}

// bearer sets the Authorization header of every call, unary or streaming.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if b != "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if b != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		}
		return conn
	}
}

func (bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
