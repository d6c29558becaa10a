package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/privacy"
)

func TestSettingsEventRoundTrip(t *testing.T) {
	st := privacy.Settings{User: "u1", ShareRead: false, ShareDelivered: true, VersionMs: 42}
	rec, err := event.EncodeSettings(st)
	require.NoError(t, err)
	require.Equal(t, "u::u1", string(rec.Key))
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, &st, d.Settings)
	require.Nil(t, d.Erasure)
	require.Equal(t, "u1", d.User())
	require.Equal(t, "u::u1", d.RecordKey())

	bad := *rec
	bad.Key = []byte("u::other")
	_, err = event.DecodeRecord(&bad)
	require.ErrorIs(t, err, event.ErrUndecodable)
	require.ErrorContains(t, err, "does not match")
	_, err = event.DecodeRecord(must(event.EncodeSettings(privacy.Settings{User: "u1"})))
	require.ErrorContains(t, err, "version_unix_ms must be between 1 and")
}

func must(r *kgo.Record, err error) *kgo.Record {
	if err != nil {
		panic(err)
	}
	return r
}
