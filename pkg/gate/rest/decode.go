package rest

import (
	"slices"
	"strconv"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
)

// The strict JSON reader of the hot write routes' request bodies: it
// accepts only what protojson reads the same way (see the package doc) and
// reports false on anything else, so the caller falls back to vanguard
// (and protojson) for the canonical answer.

type jsonReader struct {
	b []byte
	i int
	// discard: str checks strings without copying them (items past a
	// batch's limit are only counted).
	discard bool
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// eat skips whitespace and consumes c.
func (r *jsonReader) eat(c byte) bool {
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// peek skips whitespace and reports whether the next byte is c.
func (r *jsonReader) peek(c byte) bool {
	r.ws()
	return r.i < len(r.b) && r.b[r.i] == c
}

// raw reads a string of printable ASCII without escapes and returns its
// bytes, uncopied.
func (r *jsonReader) raw() ([]byte, bool) {
	if !r.eat('"') {
		return nil, false
	}
	start := r.i
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return r.b[start : r.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
		r.i++
	}
	return nil, false
}

// str is raw as a string ("" while discarding).
func (r *jsonReader) str() (string, bool) {
	b, ok := r.raw()
	if !ok || r.discard {
		return "", ok
	}
	return string(b), true
}

// int64 reads an integer literal or a quoted one, as protojson reads
// int64 fields (no fraction or exponent here: those fall back).
func (r *jsonReader) int64() (int64, bool) {
	r.ws()
	quoted := r.i < len(r.b) && r.b[r.i] == '"'
	if quoted {
		r.i++
	}
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	digits := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	n := r.i - digits
	if n == 0 || n > 1 && r.b[digits] == '0' {
		return 0, false
	}
	v, err := strconv.ParseInt(string(r.b[start:r.i]), 10, 64)
	if err != nil {
		return 0, false
	}
	if quoted && !r.eat('"') {
		return 0, false
	}
	if !quoted && r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		return 0, false
	}
	return v, true
}

func (r *jsonReader) boolean() (bool, bool) {
	r.ws()
	switch {
	case len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "true":
		r.i += 4
		return true, true
	case len(r.b)-r.i >= 5 && string(r.b[r.i:r.i+5]) == "false":
		r.i += 5
		return false, true
	}
	return false, false
}

func (r *jsonReader) kind() (receiptsv1.Kind, bool) {
	if r.peek('"') {
		s, ok := r.raw()
		if !ok {
			return 0, false
		}
		v, known := receiptsv1.Kind_value[string(s)]
		return receiptsv1.Kind(v), known
	}
	v, ok := r.int64()
	if !ok || v < 0 || v > 2 {
		return 0, false
	}
	return receiptsv1.Kind(v), true
}

// object reads {"name": value, …}, calling field for each name (which
// reads the value); names must be distinct after spelling is normalised.
func (r *jsonReader) object(field func(name string) bool) bool {
	if !r.eat('{') {
		return false
	}
	if r.eat('}') {
		return true
	}
	var seenBuf [len(fieldNames)]string
	seen := seenBuf[:0]
	for {
		raw, ok := r.raw()
		if !ok || !r.eat(':') {
			return false
		}
		name := fieldName(raw)
		if name == "" || slices.Contains(seen, name) {
			return false // a field these routes do not know, or a repeat
		}
		seen = append(seen, name)
		if !field(name) {
			return false
		}
		if r.eat(',') {
			continue
		}
		return r.eat('}')
	}
}

// end reports whether only whitespace is left.
func (r *jsonReader) end() bool {
	r.ws()
	return r.i == len(r.b)
}

// fieldNames are the proto names of the fields the fast routes read.
var fieldNames = [...]string{"receipts", "user_id", "channel_id", "kind", "seq", "message_id", "device_id", "epoch", "private"}

// fieldName maps a field's name as sent (the proto name or protojson's
// lowerCamelCase) to its proto name, without allocating; "" for any other
// name (the body then goes to vanguard).
func fieldName(b []byte) string {
	switch string(b) {
	case "userId":
		return "user_id"
	case "channelId":
		return "channel_id"
	case "messageId":
		return "message_id"
	case "deviceId":
		return "device_id"
	}
	for _, n := range fieldNames {
		if string(b) == n {
			return n
		}
	}
	return ""
}

// DecodeMarkReceipts reads the body of POST MarkPath, or reports false.
// It keeps at most maxItems receipts (maxItems ≤ 0: no bound) and, past
// them, goes on checking the syntax and counting into one scratch receipt,
// so an oversized batch never costs more memory than a full one; items is
// how many receipts the body holds (the caller refuses items > maxItems
// with the count in the message, as validation does).
func DecodeMarkReceipts(body []byte, maxItems int) (req *receiptsv1.MarkReceiptsRequest, items int, ok bool) {
	r := &jsonReader{b: body}
	req = &receiptsv1.MarkReceiptsRequest{}
	var scratch receiptsv1.Receipt
	ok = r.object(func(name string) bool {
		if name != "receipts" || !r.eat('[') {
			return false
		}
		if r.eat(']') {
			return true
		}
		for {
			rc := &scratch
			if r.discard = maxItems > 0 && items >= maxItems; !r.discard {
				rc = &receiptsv1.Receipt{}
			}
			if !r.object(func(name string) bool { return receiptField(r, rc, name) }) {
				return false
			}
			if rc != &scratch {
				req.Receipts = append(req.Receipts, rc)
			}
			items++
			if r.eat(',') {
				continue
			}
			return r.eat(']')
		}
	})
	if !ok || !r.end() {
		return nil, 0, false
	}
	return req, items, true
}

func receiptField(r *jsonReader, rc *receiptsv1.Receipt, name string) bool {
	var ok bool
	switch name {
	case "user_id":
		rc.UserId, ok = r.str()
	case "channel_id":
		rc.ChannelId, ok = r.str()
	case "kind":
		rc.Kind, ok = r.kind()
	case "seq":
		rc.Seq, ok = r.int64()
	case "message_id":
		rc.MessageId, ok = r.str()
	case "device_id":
		rc.DeviceId, ok = r.str()
	case "epoch":
		var e int64
		e, ok = r.int64()
		rc.Epoch = &e
	case "private":
		rc.Private, ok = r.boolean()
	}
	return ok
}

// DecodeMark reads the body of a single-mark route (user and channel come
// from the path; a body naming them goes to vanguard), or reports false.
func DecodeMark(body []byte) (*receiptsv1.MarkRequest, bool) {
	r := &jsonReader{b: body}
	req := &receiptsv1.MarkRequest{}
	ok := r.object(func(name string) bool {
		var ok bool
		switch name {
		case "seq":
			req.Seq, ok = r.int64()
		case "message_id":
			req.MessageId, ok = r.str()
		case "device_id":
			req.DeviceId, ok = r.str()
		case "epoch":
			var e int64
			e, ok = r.int64()
			req.Epoch = &e
		case "private":
			req.Private, ok = r.boolean()
		}
		return ok
	})
	if !ok || !r.end() {
		return nil, false
	}
	return req, true
}
