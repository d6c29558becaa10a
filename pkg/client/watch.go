package client

import (
	"context"
	"errors"
	"iter"
	"slices"

	"connectrpc.com/connect"
	"github.com/sethvargo/go-retry"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
)

// errStreamEnded is the failure of a watch stream the server closed
// without an error: watch streams never end by themselves, so it is
// resumed like a dropped one.
var errStreamEnded = errors.New("watch stream ended by the server")

// Watch runs a WatchChannels stream over req's channels and yields its
// events until ctx ends (then it stops without an error) or the stream
// fails for good (then the failure is yielded once, last).
//
// It keeps the resume token of the last event it received, and when the
// stream fails retryably (IsRetryable: the gateway drained for a
// restart, lost its store, or the connection broke; or the server closed
// the stream) it opens a new one with that token after a backoff wait
// (the client's RetryPolicy; the attempts count failed reconnects in a
// row, and an event received starts the count over). The server resumes
// right after the token, so across reconnects no update is lost and none
// comes twice. When the token is too old to resume from, the next event
// says so (resume_token_expired) and carries a snapshot of the channels'
// ticks instead of the missed updates: replace what you show with it.
//
// A fresh stream (req.ResumeToken empty) starts with such a snapshot; to
// pick up where an earlier Watch stopped, pass the last event's
// resume_token. Heartbeats (events without updates or snapshot) are not
// yielded. Breaking out of the loop closes the stream.
func (c *Client) Watch(ctx context.Context, req *receiptsv1.WatchChannelsRequest) iter.Seq2[*receiptsv1.WatchEvent, error] {
	return func(yield func(*receiptsv1.WatchEvent, error) bool) {
		channels := slices.Clone(req.GetChannelId())
		token := req.GetResumeToken()
		var st retryState
		progress, done := false, false
		fresh := func() bool { p := progress; progress = false; return p }
		b := c.cfg.Retry.backoff(ctx, receiptsv1connect.ReceiptServiceWatchChannelsProcedure, &st, fresh)
		err := retry.Do(ctx, b, func(ctx context.Context) error {
			st.attempt++
			err := c.stream(ctx, channels, token, func(ev *receiptsv1.WatchEvent) bool {
				if t := ev.GetResumeToken(); t != "" {
					token = t
				}
				progress, st.attempt = true, 1
				if len(ev.GetUpdates()) == 0 && len(ev.GetSnapshot()) == 0 && !ev.GetResumeTokenExpired() {
					return true // a heartbeat
				}
				done = !yield(ev, nil)
				return !done
			})
			if done || ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errStreamEnded
			}
			st.last = err
			if errors.Is(err, errStreamEnded) || IsRetryable(err) || brokenStream(err) {
				return retry.RetryableError(err)
			}
			return err
		})
		if err != nil && !done && ctx.Err() == nil {
			yield(nil, err)
		}
	}
}

// stream runs one WatchChannels stream from token, calling each for every
// event until each returns false, the stream fails, or ctx ends.
func (c *Client) stream(ctx context.Context, channels []string, token string, each func(*receiptsv1.WatchEvent) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	s, err := c.raw.WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: channels, ResumeToken: token}))
	if err != nil {
		cancel()
		return err
	}
	// Canceled first, so that closing does not wait on a live stream.
	defer func() { cancel(); _ = s.Close() }()
	for s.Receive() {
		if !each(s.Msg()) {
			return nil
		}
	}
	return s.Err()
}

// brokenStream reports whether err is the connection failing under the
// stream (not an answer of the server): resuming is the remedy.
func brokenStream(err error) bool {
	if connect.IsWireError(err) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnknown, connect.CodeInternal, connect.CodeUnavailable:
		return true
	}
	return false
}
