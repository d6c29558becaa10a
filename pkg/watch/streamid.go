package watch

import (
	"errors"
	"strconv"
	"strings"
)

// streamID is a Redis stream entry id, "ms-seq".
type streamID struct{ ms, seq uint64 }

var errBadStreamID = errors.New("bad stream id")

func parseStreamID(s string) (streamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, errBadStreamID
	}
	m, err1 := strconv.ParseUint(ms, 10, 64)
	q, err2 := strconv.ParseUint(seq, 10, 64)
	if err1 != nil || err2 != nil {
		return streamID{}, errBadStreamID
	}
	return streamID{m, q}, nil
}

func (id streamID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

// after is the exclusive start of an XRANGE after id.
func (id streamID) after() string { return "(" + id.String() }

func (id streamID) compare(o streamID) int {
	switch {
	case id.ms < o.ms:
		return -1
	case id.ms > o.ms:
		return 1
	case id.seq < o.seq:
		return -1
	case id.seq > o.seq:
		return 1
	}
	return 0
}
