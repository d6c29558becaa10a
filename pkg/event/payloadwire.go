package event

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/receipt"
)

// The hand-written wire codec of the payloads the hot paths read and
// write (a mark's cursors, a head, a membership, group mentions): decoded
// without the generated messages' allocations, and held to the generated
// decoder by the tests.

// The field numbers of Cursors, Cursor and Position.
const (
	cursorsReadField      protowire.Number = 1
	cursorsDeliveredField protowire.Number = 2
	cursorsPrivateField   protowire.Number = 3
	cursorsDeviceField    protowire.Number = 4
)

// parseGroupMentions reads a GroupMentions message, as the generated
// decoder does; at most channel.MaxGroupMentionsPerEvent+1 are read (one
// more is refused by the check after).
func parseGroupMentions(b []byte) ([]channel.GroupMention, error) {
	var out []channel.GroupMention
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: malformed group mentions payload: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 {
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return nil, fmt.Errorf("%w: malformed group mentions payload: %v", ErrUndecodable, protowire.ParseError(k))
			}
			b = b[k:]
			continue
		}
		if typ != protowire.BytesType {
			return nil, fmt.Errorf("%w: malformed group mentions payload: field 1 has wire type %d", ErrUndecodable, typ)
		}
		v, k := protowire.ConsumeBytes(b)
		if k < 0 {
			return nil, fmt.Errorf("%w: malformed group mentions payload: %v", ErrUndecodable, protowire.ParseError(k))
		}
		b = b[k:]
		if len(out) > channel.MaxGroupMentionsPerEvent {
			return nil, fmt.Errorf("%w: invalid event: more than %d group mentions", ErrUndecodable, channel.MaxGroupMentionsPerEvent)
		}
		var m channel.GroupMention
		if err := parseGroupMention(v, &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// parseGroupMention reads a GroupMention message into m.
func parseGroupMention(b []byte, m *channel.GroupMention) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: malformed group mention: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return fmt.Errorf("%w: malformed group mention: %v", ErrUndecodable, protowire.ParseError(k))
			}
			m.Seq, b = int64(x), b[k:]
		case num == 2 && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return fmt.Errorf("%w: malformed group mention: %v", ErrUndecodable, protowire.ParseError(k))
			}
			m.Sender, b = string(v), b[k:]
		case num == 1 || num == 2:
			return fmt.Errorf("%w: malformed group mention: field %d has wire type %d", ErrUndecodable, num, typ)
		default:
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return fmt.Errorf("%w: malformed group mention: %v", ErrUndecodable, protowire.ParseError(k))
			}
			b = b[k:]
		}
	}
	return nil
}

// parseMembership reads a Membership message into m, as the generated
// decoder does (its ids are the envelope's: the message's own are
// skipped).
func parseMembership(b []byte, m *channel.Membership) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: malformed membership payload: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		if num < 3 || num > 6 {
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return fmt.Errorf("%w: malformed membership payload: %v", ErrUndecodable, protowire.ParseError(k))
			}
			b = b[k:]
			continue
		}
		if typ != protowire.VarintType {
			return fmt.Errorf("%w: malformed membership payload: field %d has wire type %d", ErrUndecodable, num, typ)
		}
		x, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return fmt.Errorf("%w: malformed membership payload: %v", ErrUndecodable, protowire.ParseError(k))
		}
		b = b[k:]
		switch num {
		case 3:
			m.Member = x != 0
		case 4:
			m.VersionSeq = int64(x)
		case 5:
			m.VersionUnixMs = int64(x)
		default:
			m.JoinSeq = int64(x)
		}
	}
	return nil
}

// parseHead reads a Head (or ThreadHead) message into c: its one field, a
// Cursor, merged as protobuf does; false when the field is absent.
func parseHead(b []byte, c *receipt.Cursor) (bool, error) {
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false, fmt.Errorf("%w: malformed head payload: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return false, fmt.Errorf("%w: malformed head payload: %v", ErrUndecodable, protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		if typ != protowire.BytesType {
			return false, fmt.Errorf("%w: malformed head payload: field 1 has wire type %d", ErrUndecodable, typ)
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return false, fmt.Errorf("%w: malformed head payload: %v", ErrUndecodable, protowire.ParseError(m))
		}
		b = b[m:]
		if err := parseCursor(v, c); err != nil {
			return false, err
		}
		found = true
	}
	return found, nil
}

// appendCursors appends the Cursors message of s (the cursors that carry
// a position, and the device), as proto.Marshal writes it.
func appendCursors(b []byte, s receipt.State) []byte {
	if !s.Read.Position.IsZero() {
		b = appendCursor(b, cursorsReadField, s.Read)
	}
	if !s.Delivered.Position.IsZero() {
		b = appendCursor(b, cursorsDeliveredField, s.Delivered)
	}
	if !s.PrivateRead.Position.IsZero() {
		b = appendCursor(b, cursorsPrivateField, s.PrivateRead)
	}
	return appendString(b, cursorsDeviceField, s.DeviceID)
}

// cursorsSize is len(appendCursors(nil, s)).
func cursorsSize(s receipt.State) int {
	n := 0
	for _, c := range []receipt.Cursor{s.Read, s.Delivered, s.PrivateRead} {
		if !c.Position.IsZero() {
			n += 1 + protowire.SizeBytes(cursorSize(c))
		}
	}
	if s.DeviceID != "" {
		n += 1 + protowire.SizeBytes(len(s.DeviceID))
	}
	return n
}

// parseCursors reads a Cursors message into s, by protobuf's rules (a
// later scalar wins, a repeated message merges); fields it does not name
// are skipped. Hand-written because it runs for nearly every record the
// persister reads: the generated decoder allocates a message per cursor
// and position.
func parseCursors(b []byte, s *receipt.State) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: malformed cursors payload: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		var c *receipt.Cursor
		switch num {
		case cursorsReadField:
			c = &s.Read
		case cursorsDeliveredField:
			c = &s.Delivered
		case cursorsPrivateField:
			c = &s.PrivateRead
		}
		if (c != nil || num == cursorsDeviceField) && typ != protowire.BytesType {
			return fmt.Errorf("%w: malformed cursors payload: field %d has wire type %d", ErrUndecodable, num, typ)
		}
		if c == nil && num != cursorsDeviceField {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("%w: malformed cursors payload: %v", ErrUndecodable, protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return fmt.Errorf("%w: malformed cursors payload: %v", ErrUndecodable, protowire.ParseError(m))
		}
		b = b[m:]
		if c == nil {
			s.DeviceID = string(v)
			continue
		}
		if err := parseCursor(v, c); err != nil {
			return err
		}
	}
	// As cursorFromRecord: a message id without a position names nothing.
	for _, c := range []*receipt.Cursor{&s.Read, &s.Delivered, &s.PrivateRead} {
		if c.Position.IsZero() {
			c.MessageID = ""
		}
	}
	return nil
}

// parseCursor merges a Cursor message into c.
func parseCursor(b []byte, c *receipt.Cursor) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: malformed cursor: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 && num != 2 {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("%w: malformed cursor: %v", ErrUndecodable, protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: malformed cursor: field %d has wire type %d", ErrUndecodable, num, typ)
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return fmt.Errorf("%w: malformed cursor: %v", ErrUndecodable, protowire.ParseError(m))
		}
		b = b[m:]
		if num == 2 {
			c.MessageID = string(v)
			continue
		}
		if err := parsePosition(v, &c.Position); err != nil {
			return err
		}
	}
	return nil
}

// parsePosition merges a Position message into p.
func parsePosition(b []byte, p *receipt.Position) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: malformed position: %v", ErrUndecodable, protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 && num != 2 {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return fmt.Errorf("%w: malformed position: %v", ErrUndecodable, protowire.ParseError(m))
			}
			b = b[m:]
			continue
		}
		if typ != protowire.VarintType {
			return fmt.Errorf("%w: malformed position: field %d has wire type %d", ErrUndecodable, num, typ)
		}
		x, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return fmt.Errorf("%w: malformed position: %v", ErrUndecodable, protowire.ParseError(m))
		}
		b = b[m:]
		if num == 1 {
			p.Epoch = int64(x)
		} else {
			p.Seq = int64(x)
		}
	}
	return nil
}
