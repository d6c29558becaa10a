package kafkaconf_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/kafkaconf"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	want := map[errclass.Class][]error{
		errclass.None: {nil},
		errclass.Unavailable: {
			kgo.ErrRecordTimeout, kgo.ErrRecordRetries, kgo.ErrMaxBuffered, context.DeadlineExceeded,
			kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.UnknownTopicOrPartition,
			io.ErrUnexpectedEOF, fmt.Errorf("producing: %w", kerr.LeaderNotAvailable),
		},
		errclass.Rejected:  {kerr.MessageTooLarge, kerr.InvalidRecord, fmt.Errorf("producing: %w", kerr.RecordListTooLarge)},
		errclass.Permanent: {kerr.TopicAuthorizationFailed, fmt.Errorf("producing: %w", kerr.SaslAuthenticationFailed)},
		errclass.Canceled:  {kgo.ErrClientClosed, context.Canceled},
	}
	for class, errs := range want {
		for _, err := range errs {
			require.Equal(t, class, kafkaconf.Classify(err), "%v", err)
		}
	}
}
