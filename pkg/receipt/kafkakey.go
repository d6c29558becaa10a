package receipt

import "strings"

// Record keys on the topic read-receipts name ids, and ids may contain ':'
// (Matrix ids such as "@alice:example.org"), the separator of a user
// event's key. So, inside an id in a record key:
//
//	'%' is written "%25" and ':' is written "%3A"
//
// and no other byte is escaped, so that keys stay readable and a user
// event's key "user:channel" holds exactly one unescaped ':'. The keys:
//
//	user event        EscapeKeyID(user) ":" EscapeKeyID(channel)
//	channel event     EscapeKeyID(channel)             (no ':')
//	user-wide event   "u::" EscapeKeyID(user)          (pkg/event)
//
// Unescaping accepts "%25" and "%3A" only (uppercase hex), so every id
// has one spelling. Records written before the escape carry ids as they
// are (ids could hold '%' then, never ':'): a consumer reads the ids from
// the record's value, never from the key, and accepts either spelling
// (pkg/event DecodeRecord). The key is for partitioning and for people.

// EscapeKeyID is id as it is written inside a record key.
func EscapeKeyID(id string) string {
	if !strings.ContainsAny(id, "%:") {
		return id
	}
	return string(AppendKeyID(make([]byte, 0, KeyIDLen(id)), id))
}

// AppendKeyID appends EscapeKeyID(id) to b.
func AppendKeyID(b []byte, id string) []byte {
	for {
		i := strings.IndexAny(id, "%:")
		if i < 0 {
			return append(b, id...)
		}
		b = append(b, id[:i]...)
		if id[i] == '%' {
			b = append(b, "%25"...)
		} else {
			b = append(b, "%3A"...)
		}
		id = id[i+1:]
	}
}

// KeyIDLen is len(EscapeKeyID(id)).
func KeyIDLen(id string) int {
	return len(id) + 2*(strings.Count(id, "%")+strings.Count(id, ":"))
}

// UnescapeKeyID inverts EscapeKeyID; false when s holds a ':' or a '%'
// that does not start "%25" or "%3A".
func UnescapeKeyID(s string) (string, bool) {
	if strings.IndexByte(s, ':') >= 0 {
		return "", false
	}
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexByte(s, '%')
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		b.WriteString(s[:i])
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%3A"):
			b.WriteByte(':')
		default:
			return "", false
		}
		s = s[i+3:]
	}
}

// KafkaKey is the record key of the key's user events on the topic
// read-receipts: the escaped user, ':', the escaped channel.
func (k Key) KafkaKey() string {
	if !strings.ContainsAny(k.User, "%:") && !strings.ContainsAny(k.Channel, "%:") {
		return k.User + ":" + k.Channel
	}
	b := make([]byte, 0, k.KafkaKeyLen())
	return string(k.AppendKafkaKey(b))
}

// AppendKafkaKey appends k.KafkaKey() to b.
func (k Key) AppendKafkaKey(b []byte) []byte {
	b = AppendKeyID(b, k.User)
	b = append(b, ':')
	return AppendKeyID(b, k.Channel)
}

// KafkaKeyLen is len(k.KafkaKey()).
func (k Key) KafkaKeyLen() int { return KeyIDLen(k.User) + 1 + KeyIDLen(k.Channel) }

// LegacyKafkaKey is the key the builds before the escape wrote, the ids as
// they are; "" when an id holds ':' (no such record was ever written).
func (k Key) LegacyKafkaKey() string {
	if strings.IndexByte(k.User, ':') >= 0 || strings.IndexByte(k.Channel, ':') >= 0 {
		return ""
	}
	return k.User + ":" + k.Channel
}

// ParseKafkaKey reads a user event's key written by KafkaKey.
func ParseKafkaKey(s string) (Key, bool) {
	user, channel, ok := strings.Cut(s, ":")
	if !ok || user == "" || channel == "" {
		return Key{}, false
	}
	u, uok := UnescapeKeyID(user)
	c, cok := UnescapeKeyID(channel)
	if !uok || !cok {
		return Key{}, false
	}
	return Key{User: u, Channel: c}, true
}
