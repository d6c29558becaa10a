package loadgen

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The scanner reads the answers as encoding/json does, and anything it
// does not expect (escapes, other shapes) falls back to encoding/json.
func TestDecodeMarkResponseMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	answers := []string{
		`{"results":[]}`,
		`{"results":[{"state":{"key":{"userId":"u1","channelId":"c{1}"},"read":{"position":{"seq":"4"},"messageId":"m\"4]"}},"advanced":true,"durability":"KAFKA"},{"durability":"SPOOLED","realtimeDegraded":true},{}]}`,
		`{"result":{"state":{"read":{"position":{"epoch":"1","seq":"9"}}},"advanced":false,"durability":"KAFKA","realtime_degraded":true}}`,
		` { "results" : [ { "advanced" : true , "durability" : "KAFKA" , "extra" : [1, 2.5, null, "x"] } ] } `,
		`{"results":[{"durability":"K\u0041FKA"}]}`,
	}
	for _, a := range answers {
		var want, got markResponse
		require.NoError(t, json.Unmarshal([]byte(a), &want), a)
		require.NoError(t, decodeMarkResponse([]byte(a), &got), a)
		if want.Results == nil {
			want.Results = []markResult{}
		}
		if got.Results == nil {
			got.Results = []markResult{}
		}
		require.Equal(t, want, got, a)
	}
	var r markResponse
	require.Error(t, decodeMarkResponse([]byte(`{"results":[`), &r), "a cut answer is an error")
}

// Ids that need no escaping are written as they are; others as
// encoding/json writes them.
func TestWriteString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "u123", `a"b`, `a\b`, "é", "<&>", "tab\t"} {
		var buf bytes.Buffer
		writeString(&buf, s)
		want, _ := json.Marshal(s)
		require.Equal(t, string(want), buf.String(), s)
	}
}
