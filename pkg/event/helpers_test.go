package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
)

// fields is d without its envelope: what the kinds' fields say, compared
// with a Decoded built by hand (TestEnvelopes checks the envelopes).
func fields(d event.Decoded) event.Decoded {
	d.Envelope = event.RecordEnvelope{}
	return d
}

// legacy is rec as the builds before the envelope wrote it (same key,
// their message), for the tests of reading the earlier format.
func legacy(t *testing.T, rec *kgo.Record) *kgo.Record {
	t.Helper()
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	old, err := event.EncodeLegacy(d)
	require.NoError(t, err)
	return old
}
