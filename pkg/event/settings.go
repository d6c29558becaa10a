package event

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/readstate/receipts/api/receipts/record/v1"
	"github.com/readstate/receipts/pkg/notification"
	"github.com/readstate/receipts/pkg/privacy"
	"github.com/readstate/receipts/pkg/receipt"
)

// EncodeSettings builds the user event of a privacy settings change (key
// "u::user", like an erasure; version 3).
func EncodeSettings(st privacy.Settings) (*kgo.Record, error) {
	return EncodeDecoded(Decoded{Settings: &st})
}

func encodeSettings(d Decoded) (*kgo.Record, error) {
	st := *d.Settings
	ev := &recordv1.UserEvent{
		SchemaVersion: SchemaVersion,
		UserId:        st.User,
		Settings: &recordv1.Settings{UserId: st.User, ShareReadReceipts: st.ShareRead,
			ShareDeliveryReceipts: st.ShareDelivered, VersionUnixMs: st.VersionMs,
			DefaultNotificationLevel: st.DefaultLevel.String()},
		AcceptedAtUnixMs:      st.VersionMs,
		UserGeneration:        d.Generation,
		UserGenerationStamped: d.Stamped,
	}
	v, err := proto.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("marshalling the settings event of %s: %w", st.User, err)
	}
	return typed(&kgo.Record{Key: []byte(UserKey(st.User)), Value: v}), nil
}

// decodeSettings validates a settings user event (schema version checked
// by the caller).
func decodeSettings(r *kgo.Record, ev *recordv1.UserEvent) (Decoded, error) {
	s := ev.GetSettings()
	st := privacy.Settings{User: ev.GetUserId(), ShareRead: s.GetShareReadReceipts(),
		ShareDelivered: s.GetShareDeliveryReceipts(), VersionMs: s.GetVersionUnixMs()}
	if err := receipt.ValidateID("user_id", st.User); err != nil {
		return Decoded{}, fmt.Errorf("%w: invalid event: %v", ErrUndecodable, err)
	}
	level, ok := notification.Parse(s.GetDefaultNotificationLevel())
	if !ok {
		return Decoded{}, fmt.Errorf("%w: invalid event: unknown default_notification_level %q", ErrUndecodable, s.GetDefaultNotificationLevel())
	}
	st.DefaultLevel = level
	if s.GetUserId() != "" && s.GetUserId() != st.User {
		return Decoded{}, fmt.Errorf("%w: invalid event: settings.user_id %q is not the event's user %q", ErrUndecodable, s.GetUserId(), st.User)
	}
	if st.VersionMs <= 0 || st.VersionMs > receipt.MaxSeq {
		return Decoded{}, fmt.Errorf("%w: invalid event: settings.version_unix_ms must be between 1 and %d", ErrUndecodable, receipt.MaxSeq)
	}
	if !matchesKey(r.Key, UserKey(st.User), legacyUserKey(st.User)) {
		return Decoded{}, fmt.Errorf("%w: record key %q does not match user event key %q", ErrUndecodable, r.Key, UserKey(st.User))
	}
	if err := validateStamp(ev.GetUserGeneration(), ev.GetAcceptedAtUnixMs()); err != nil {
		return Decoded{}, err
	}
	return Decoded{Settings: &st, AcceptedAtUnixMs: ev.GetAcceptedAtUnixMs(),
		Generation: ev.GetUserGeneration(), Stamped: stamped(ev.GetUserGenerationStamped(), ev.GetUserGeneration())}, nil
}
