package gate_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/apierrtest"
)

// TestWorkIsCharged: the calls whose work grows with what they name are
// charged to the client's rate limit by it, beyond the one event at the
// door: a notice's mentions, a watch stream's channels, a badge's
// channels. With a burst of 10 and no refill to speak of, a call that
// spends the budget leaves the next one refused with 429 and Retry-After.
func TestWorkIsCharged(t *testing.T) {
	t.Parallel()
	limited := func(c *testConfig) {
		c.Server.Auth.RateLimit, c.Server.Auth.RateLimitBurst, c.MaxBatchItems = 0.001, 10, 3
	}
	users := func(n int) string {
		us := make([]string, n)
		for i := range us {
			us[i] = fmt.Sprintf("%q", fmt.Sprintf("m%d", i))
		}
		return "[" + strings.Join(us, ",") + "]"
	}
	t.Run("mentions", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOpts{config: limited})
		status, body := tb.do(t, http.MethodPost, "/v1/channels/c/messages", `{"seq": 1, "sender_id": "s", "mentions": `+users(8)+`}`)
		require.Equal(t, http.StatusOK, status, "%s", body) // 1 + 8 of 10
		resp, body := tb.doResp(t, http.MethodPost, "/v1/channels/c/messages", `{"seq": 2, "sender_id": "s", "mentions": `+users(2)+`}`)
		apierrtest.RefusedREST(t, resp.StatusCode, body, http.StatusTooManyRequests, apierr.RateLimited) // 1 + 2 of 1
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	})
	t.Run("watch channels", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOpts{config: limited})
		base, _ := replica(t, tb, startHub(t, tb.rdb, tb.prefix))
		client := receiptsv1connect.NewReceiptServiceClient(tb.h2c, base, connect.WithGRPC())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stream, err := client.WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"a", "b", "c", "d", "e", "f", "g", "h"}}))
		require.NoError(t, err)
		require.True(t, stream.Receive(), "%v", stream.Err()) // 8 of 10
		stream2, err := client.WatchChannels(ctx, connect.NewRequest(&receiptsv1.WatchChannelsRequest{ChannelId: []string{"a", "b", "c"}}))
		require.NoError(t, err)
		require.False(t, stream2.Receive())
		apierrtest.Refused(t, stream2.Err(), connect.CodeResourceExhausted, apierr.RateLimited) // 1 + 2 of 2
	})
	t.Run("badges", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupOpts{config: limited})
		for i := range 5 {
			status, body := tb.do(t, http.MethodPut, fmt.Sprintf("/v1/channels/c%d/members/u", i), `{}`)
			require.Equal(t, http.StatusOK, status, "%s", body) // 5 of 10
		}
		// A badge over 5 channels: 1 at the door, then 5 + 1.
		resp, body := tb.doResp(t, http.MethodPost, "/v1/receipts:lookup", `{"badge_user_ids": ["u"]}`)
		apierrtest.RefusedREST(t, resp.StatusCode, body, http.StatusTooManyRequests, apierr.RateLimited)
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	})
}
