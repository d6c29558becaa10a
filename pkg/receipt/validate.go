package receipt

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLength bounds every id (user, channel, message, device) in bytes.
const MaxIDLength = 128

// FieldError names the field that failed validation, in the request's own
// spelling (for example "receipts[3].user_id").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// ValidateID checks a required id (a user's or a channel's, which name
// Redis keys and hash fields): ValidateOptionalID's rules, not empty, no
// '{' or '}' (an id sits inside a key's Redis Cluster hash tag "{id}": a
// brace would move the key to another slot and hide it from the sweeps
// that find ids in key names by the braces) and no ':' first (a hash field
// starting with ':' is a marker such as ":loaded", never an id).
func ValidateID(field, id string) error {
	if id == "" {
		return &FieldError{Field: field, Reason: "is required"}
	}
	if i := strings.IndexAny(id, "{}"); i >= 0 && len(id) <= MaxIDLength {
		return &FieldError{Field: field, Reason: fmt.Sprintf("contains %q at byte %d (ids may not hold '{' or '}', which delimit Redis hash tags)", id[i], i)}
	}
	if id[0] == ':' && len(id) <= MaxIDLength {
		return &FieldError{Field: field, Reason: "starts with ':' (which marks stored fields that are not ids)"}
	}
	return ValidateOptionalID(field, id)
}

// ValidateOptionalID checks an id that may be empty (a message's or a
// device's): at most MaxIDLength bytes of valid UTF-8, printable, no
// whitespace (the separator of the stored Redis value). Any other
// character is allowed, ':', '@', '!', '/', '#' and '%' included (Matrix
// ids, URNs); record keys escape ':' and '%' (EscapeKeyID).
func ValidateOptionalID(field, id string) error {
	if len(id) > MaxIDLength {
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %d bytes long; the limit is %d", len(id), MaxIDLength)}
	}
	if !utf8.ValidString(id) {
		return &FieldError{Field: field, Reason: "is not valid UTF-8"}
	}
	for i, r := range id {
		switch {
		case unicode.IsSpace(r):
			return &FieldError{Field: field, Reason: fmt.Sprintf("contains whitespace at byte %d", i)}
		case !unicode.IsPrint(r):
			return &FieldError{Field: field, Reason: fmt.Sprintf("contains a control or non-printable character at byte %d", i)}
		}
	}
	return nil
}

// MaxSeq bounds every seq, head, position, version and time the service
// stores: 2^53−1, the greatest integer exact in a double, so that Redis'
// Lua (which computes in doubles) and JavaScript clients hold it exactly.
// Past it a seq would compare wrong in a script, and a script's loop over
// seqs could run forever.
const MaxSeq int64 = 1<<53 - 1

// ValidateSeq checks a channel sequence: 1 … MaxSeq.
func ValidateSeq(field string, seq int64) error {
	if seq <= 0 || seq > MaxSeq {
		return &FieldError{Field: field, Reason: fmt.Sprintf("must be between 1 and %d, got %d", MaxSeq, seq)}
	}
	return nil
}

// ValidateBounded checks a number that may be 0 (a join point, a
// version, a time): 0 … MaxSeq.
func ValidateBounded(field string, n int64) error {
	if n < 0 || n > MaxSeq {
		return &FieldError{Field: field, Reason: fmt.Sprintf("must be between 0 and %d, got %d", MaxSeq, n)}
	}
	return nil
}

// ValidateEpoch checks an explicit epoch: 0..MaxEpoch.
func ValidateEpoch(field string, epoch int64) error {
	if epoch < 0 || epoch > MaxEpoch {
		return &FieldError{Field: field, Reason: fmt.Sprintf("must be between 0 and %d, got %d", MaxEpoch, epoch)}
	}
	return nil
}

// Validate checks a whole state as it travels between stores: both ids
// valid, optional ids valid, positions non-negative (so EpochCurrent, which
// only the gateway's Redis merge resolves, never travels), epochs at most
// MaxEpoch, at least one set.
func (s State) Validate() error {
	if err := ValidateID("user_id", s.Key.User); err != nil {
		return err
	}
	if err := ValidateID("channel_id", s.Key.Channel); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		c    Cursor
	}{{"read", s.Read}, {"private_read", s.PrivateRead}, {"delivered", s.Delivered}} {
		if c.c.Position.Epoch < 0 || c.c.Position.Seq < 0 {
			return &FieldError{Field: c.name, Reason: "has a negative position"}
		}
		if c.c.Position.Seq > MaxSeq {
			return ValidateSeq(c.name+".seq", c.c.Position.Seq)
		}
		// The field names are built only on failure: this runs for every
		// record the persister decodes.
		if c.c.Position.Epoch > MaxEpoch {
			return ValidateEpoch(c.name+".epoch", c.c.Position.Epoch)
		}
		if ValidateOptionalID("", c.c.MessageID) != nil {
			return ValidateOptionalID(c.name+".message_id", c.c.MessageID)
		}
	}
	if s.Read.Position.IsZero() && s.Delivered.Position.IsZero() && s.PrivateRead.Position.IsZero() {
		return &FieldError{Field: "read", Reason: "neither read, private read nor delivered carries a position"}
	}
	if s.UpdatedAtUnixMs < 0 || s.UpdatedAtUnixMs > MaxSeq {
		return ValidateBounded("updated_at", s.UpdatedAtUnixMs)
	}
	return ValidateOptionalID("device_id", s.DeviceID)
}
