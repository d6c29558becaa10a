package apiauth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	s, err := parseTokens([]byte("# upstream chat servers\n\nchat-eu:aaaaaaaaaaaaaaaa1\n  chat-eu:aaaaaaaaaaaaaaaa2  \nbbbbbbbbbbbbbbbbbbbb\n"))
	require.NoError(t, err)
	name, ok := s.lookup("aaaaaaaaaaaaaaaa1")
	require.True(t, ok)
	require.Equal(t, "chat-eu", name)
	name, ok = s.lookup("aaaaaaaaaaaaaaaa2")
	require.True(t, ok)
	require.Equal(t, "chat-eu", name, "two tokens of one client (rotation)")
	name, ok = s.lookup("bbbbbbbbbbbbbbbbbbbb")
	require.True(t, ok)
	require.Regexp(t, `^token-[0-9a-f]{8}$`, name, "an unnamed token is named by its digest")
	require.NotContains(t, name, "bbbb")

	for _, miss := range []string{"", "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa1 ", "chat-eu:aaaaaaaaaaaaaaaa1", "AAAAAAAAAAAAAAAA1"} {
		_, ok := s.lookup(miss)
		require.False(t, ok, "%q", miss)
	}
}

func TestParseTokensRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, want string }{
		{"", "no tokens"},
		{"# only a comment\n", "no tokens"},
		{"short\n", "line 1: token of 5 characters; must be 16 to 512"},
		{"ok:" + strings.Repeat("x", 16) + "\nbad name:" + strings.Repeat("y", 16) + "\n", `line 2: client name "bad name"`},
		{":" + strings.Repeat("x", 16) + "\n", "line 1: client name of 0 characters"},
		{strings.Repeat("x", 16) + "\n" + "dup:" + strings.Repeat("x", 16) + "\n", "line 2: the same token as line 1"},
		{"tab\t" + strings.Repeat("x", 16) + "\n", "outside printable ASCII"},
		{strings.Repeat("x", MaxTokenLength+1), "must be 16 to 512"},
	} {
		_, err := parseTokens([]byte(c.file))
		require.ErrorContains(t, err, c.want, "file %q", c.file)
	}

	var many strings.Builder
	for i := range MaxTokens + 1 {
		many.WriteString(strings.Repeat("t", 16))
		many.WriteString(fmt.Sprintf("%08d", i) + "\n")
	}
	_, err := parseTokens([]byte(many.String()))
	require.ErrorContains(t, err, "more than 1024 tokens")
}

func TestLoadTokensBoundsTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("#", MaxTokenFileBytes+1)), 0o600))
	_, err := loadTokens(path)
	require.ErrorContains(t, err, "larger than 1048576 bytes")
	_, err = loadTokens(filepath.Join(t.TempDir(), "absent"))
	require.ErrorContains(t, err, "opening token file")
}
