package kafkaconf_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/kafkaconf"
)

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	retryable := []error{
		kgo.ErrRecordTimeout, kgo.ErrRecordRetries, kgo.ErrMaxBuffered, context.DeadlineExceeded,
		kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.UnknownTopicOrPartition,
		io.ErrUnexpectedEOF, fmt.Errorf("producing: %w", kerr.LeaderNotAvailable),
	}
	for _, err := range retryable {
		require.True(t, kafkaconf.IsRetryable(err), "%v", err)
	}
	fatal := []error{
		nil, kgo.ErrClientClosed, context.Canceled, kerr.MessageTooLarge, kerr.TopicAuthorizationFailed,
		kerr.InvalidRecord, fmt.Errorf("producing: %w", kerr.SaslAuthenticationFailed),
	}
	for _, err := range fatal {
		require.False(t, kafkaconf.IsRetryable(err), "%v", err)
	}
}
