package redisstore

// The unread view's read of a user's mentions: the hash mh:{user} of the
// mention kind (pkg/kinds/mentions, which owns its layout, writes,
// hydrates and erases it), read here with the user's cursors and
// registers and counted without decoding. It moves out with the views.

import (
	"fmt"
	"strings"
)

// mentionsKey is the key of a user's mention hash: the kind's
// (mentions.Store.RedisKey), which the view reads.
func (s *Store) mentionsKey(user string) string { return s.prefix + "mh:{" + user + "}" }

// ParseSeqList reads a space-separated list of padded seqs (PadSeq), nil
// when it holds none: the mention kind's stored value, which the unread
// view decodes too.
func ParseSeqList(v string) ([]int64, error) {
	var out []int64
	for m := range strings.FieldsSeq(v) {
		q, err := parsePadded(m)
		if err != nil || len(m) != seqWidth {
			return nil, fmt.Errorf("%q is not a padded seq", m)
		}
		out = append(out, q)
	}
	return out, nil
}

// countMentionsAbove counts the members of a stored mention list above
// bound (a padded seq): byte order is numeric order, and the list is
// ascending, so the count is read from the end without decoding.
func countMentionsAbove(v string, bound []byte) int64 {
	var n int64
	for v != "" {
		i := strings.LastIndexByte(v, ' ')
		if v[i+1:] <= string(bound) {
			break
		}
		n++
		if i < 0 {
			break
		}
		v = v[:i]
	}
	return n
}
