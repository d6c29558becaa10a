package watch

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	cursor := map[string]streamID{}
	for i := range 1000 {
		cursor[fmt.Sprintf("channel-%04d", i)] = streamID{1_790_000_000_000 + uint64(i)*7919, uint64(i % 3)}
	}
	cursor["empty"] = streamID{}
	s := encodeToken(cursor)
	// About 15 bytes a channel before base64 (20 after): bounded.
	require.Less(t, len(s), 1001*21, "token size")
	tok, err := decodeToken(s)
	require.NoError(t, err)
	require.Len(t, tok, len(cursor))
	for ch, id := range cursor {
		got, ok := tok.lookup(ch)
		require.True(t, ok, ch)
		require.Equal(t, id, got, ch)
	}
	_, ok := tok.lookup("not-in-token")
	require.False(t, ok)
}

func TestTokenRejectsGarbage(t *testing.T) {
	t.Parallel()
	good := encodeToken(map[string]streamID{"general": {1, 2}, "random": {3, 4}})
	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	flipped := append([]byte(nil), raw...)
	flipped[3] ^= 0x40
	truncated := raw[:len(raw)-6]
	cases := map[string]string{
		"not base64":    "!!!",
		"too short":     "AQ",
		"bit flipped":   base64.RawURLEncoding.EncodeToString(flipped),
		"truncated":     base64.RawURLEncoding.EncodeToString(truncated),
		"other text":    base64.RawURLEncoding.EncodeToString([]byte("hello, this is not a token")),
		"huge":          string(make([]byte, 100_000)),
		"padded":        good + "==",
		"trailing junk": good + "AAAA",
	}
	for name, s := range cases {
		_, err := decodeToken(s)
		require.True(t, errors.Is(err, ErrBadToken), "%s: %v", name, err)
	}
	tok, err := decodeToken("")
	require.NoError(t, err)
	require.Nil(t, tok)
}

func TestSlotMatchesRedisCluster(t *testing.T) {
	t.Parallel()
	// The examples of Redis's CLUSTER KEYSLOT documentation.
	require.Equal(t, uint16(11058), slot("somekey"))
	require.Equal(t, uint16(2515), slot("foo{hash_tag}"))
	require.Equal(t, slot("hash_tag"), slot("bar{hash_tag}"))
}
