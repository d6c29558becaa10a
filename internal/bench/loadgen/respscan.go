package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
)

// A scanner of the gateway's mark answers that reads only what the tool
// counts (advanced, durability, realtime-degraded of each result) and
// skips the rest (each result's state) without building it: decoding
// whole answers with encoding/json costs the tool CPU that a co-located
// run takes from the stack it measures. Anything it does not
// expect falls back to encoding/json.

var errUnexpected = errors.New("unexpected answer shape")

// decodeMarkResponse reads an answer of the batch or single-mark routes.
func decodeMarkResponse(raw []byte, out *markResponse) error {
	if err := scanMarkResponse(raw, out); err == nil {
		return nil
	}
	*out = markResponse{}
	return json.Unmarshal(raw, out)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\r' || s.b[s.i] == '\t') {
		s.i++
	}
}

func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes (the answer's names and enums).
func (s *scanner) str() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	j := bytes.IndexByte(s.b[s.i:], '"')
	if j < 0 || bytes.IndexByte(s.b[s.i:s.i+j], '\\') >= 0 {
		return nil, false
	}
	v := s.b[s.i : s.i+j]
	s.i += j + 1
	return v, true
}

// skip passes over one value of any kind.
func (s *scanner) skip() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	case '"':
		s.skipString()
		return s.i <= len(s.b)
	default:
		for s.i < len(s.b) && s.b[s.i] != ',' && s.b[s.i] != '}' && s.b[s.i] != ']' {
			s.i++
		}
		return true
	}
}

// object reads {"name": value, …}, field reading each value.
func (s *scanner) object(field func(name []byte) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		name, ok := s.str()
		if !ok || !s.eat(':') || !field(name) {
			return false
		}
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

func (s *scanner) boolean() (bool, bool) {
	s.ws()
	switch {
	case bytes.HasPrefix(s.b[s.i:], []byte("true")):
		s.i += 4
		return true, true
	case bytes.HasPrefix(s.b[s.i:], []byte("false")):
		s.i += 5
		return false, true
	}
	return false, false
}

func (s *scanner) result(r *markResult) bool {
	return s.object(func(name []byte) bool {
		var ok bool
		switch string(name) {
		case "advanced":
			r.Advanced, ok = s.boolean()
		case "realtimeDegraded":
			r.RealtimeDegraded, ok = s.boolean()
		case "realtime_degraded":
			r.RealtimeDegradedSnake, ok = s.boolean()
		case "durability":
			var v []byte
			v, ok = s.str()
			r.Durability = durabilityName(v)
		default:
			ok = s.skip()
		}
		return ok
	})
}

// durabilityName avoids an allocation for the names the gateway sends.
func durabilityName(v []byte) string {
	switch string(v) {
	case "KAFKA":
		return "KAFKA"
	case "SPOOLED":
		return "SPOOLED"
	}
	return string(v)
}

func scanMarkResponse(raw []byte, out *markResponse) error {
	s := &scanner{b: raw}
	ok := s.object(func(name []byte) bool {
		switch string(name) {
		case "results":
			if !s.eat('[') {
				return false
			}
			if s.eat(']') {
				return true
			}
			for {
				out.Results = append(out.Results, markResult{})
				if !s.result(&out.Results[len(out.Results)-1]) {
					return false
				}
				if s.eat(',') {
					continue
				}
				return s.eat(']')
			}
		case "result":
			out.Result = &markResult{}
			return s.result(out.Result)
		}
		return s.skip()
	})
	s.ws()
	if !ok || s.i != len(s.b) {
		return errUnexpected
	}
	return nil
}

// skipString moves past the string that starts at s.i (its closing quote
// included), escapes and all.
func (s *scanner) skipString() {
	s.i++
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
}
