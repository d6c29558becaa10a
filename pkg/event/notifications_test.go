package event_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

func TestNotificationsEventRoundTrip(t *testing.T) {
	t.Parallel()
	r := notification.Register{Key: receipt.Key{User: "u1", Channel: "c1"}, Level: notification.Mentions,
		MutedUntilUnixMs: 500, VersionUnixMs: 42}
	rec, err := event.EncodeNotifications(r, 3, true)
	require.NoError(t, err)
	d, err := event.DecodeRecord(rec)
	require.NoError(t, err)
	require.Equal(t, &r, d.Notifications)
	require.Equal(t, int64(42), d.AcceptedAt())
	require.Equal(t, int64(3), d.Generation)

	rec = legacy(t, rec)
	var ev recordv1.ReceiptEvent
	require.NoError(t, proto.Unmarshal(rec.Value, &ev))
	require.Equal(t, uint32(event.NotificationSchemaVersion), ev.GetSchemaVersion())
	for name, corrupt := range map[string]func(*recordv1.ReceiptEvent){
		"unknown level":  func(ev *recordv1.ReceiptEvent) { ev.Notifications.Level = "loud" },
		"negative mute":  func(ev *recordv1.ReceiptEvent) { ev.Notifications.MutedUntilUnixMs = -1 },
		"no version":     func(ev *recordv1.ReceiptEvent) { ev.Notifications.VersionUnixMs = 0 },
		"an old version": func(ev *recordv1.ReceiptEvent) { ev.SchemaVersion = event.ThreadSchemaVersion },
	} {
		bad := proto.Clone(&ev).(*recordv1.ReceiptEvent)
		corrupt(bad)
		v, err := proto.Marshal(bad)
		require.NoError(t, err)
		badRec := *rec
		badRec.Value = v
		_, err = event.DecodeRecord(&badRec)
		require.ErrorIs(t, err, event.ErrUndecodable, name)
	}
}

func TestSettingsEventCarriesDefaultLevel(t *testing.T) {
	t.Parallel()
	st := privacy.Settings{User: "u1", ShareRead: true, ShareDelivered: true, VersionMs: 7, DefaultLevel: notification.None}
	d, err := event.DecodeRecord(must(event.EncodeSettings(st)))
	require.NoError(t, err)
	require.Equal(t, &st, d.Settings)
}
