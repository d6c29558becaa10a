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
	s, err := parseTokens([]byte("# upstream chat servers\n\nchat-eu:aaaaaaaaaaaaaaaa1\n  chat-eu:aaaaaaaaaaaaaaaa2  \nbbbbbbbbbbbbbbbbbbbb\n" +
		"gdpr:cccccccccccccccc1:erase\nviewer:cccccccccccccccc2:read, watch\nall:cccccccccccccccc3:write,read,watch,erase\n" +
		"relay:dddddddddddddddd1:mark,read\nbackend:dddddddddddddddd2:notify\n"))
	require.NoError(t, err)
	name, scopes, ok := s.lookup("aaaaaaaaaaaaaaaa1")
	require.True(t, ok)
	require.Equal(t, "chat-eu", name)
	require.Equal(t, DefaultScopes, scopes, "name:token, the first format, grants mark, notify, read and watch")
	require.Equal(t, "mark,notify,read,watch", scopes.String())
	name, _, ok = s.lookup("aaaaaaaaaaaaaaaa2")
	require.True(t, ok)
	require.Equal(t, "chat-eu", name, "two tokens of one client (rotation)")
	name, scopes, ok = s.lookup("bbbbbbbbbbbbbbbbbbbb")
	require.True(t, ok)
	require.Regexp(t, `^token-[0-9a-f]{8}$`, name, "an unnamed token is named by its digest")
	require.NotContains(t, name, "bbbb")
	require.Equal(t, DefaultScopes, scopes)
	require.False(t, scopes.Has(ScopeErase), "erase is never a default")

	name, scopes, ok = s.lookup("cccccccccccccccc1")
	require.True(t, ok)
	require.Equal(t, "gdpr", name)
	require.Equal(t, ScopeErase, scopes, "a scope list grants exactly its scopes")
	_, scopes, _ = s.lookup("cccccccccccccccc2")
	require.Equal(t, ScopeRead|ScopeWatch, scopes)
	_, scopes, _ = s.lookup("cccccccccccccccc3")
	require.Equal(t, AllScopes, scopes, "write, the older name, is mark and notify")
	_, scopes, _ = s.lookup("dddddddddddddddd1")
	require.Equal(t, ScopeMark|ScopeRead, scopes, "a tier that relays reads: no notices, deletions or membership")
	require.False(t, scopes.Has(ScopeNotify))
	_, scopes, _ = s.lookup("dddddddddddddddd2")
	require.Equal(t, ScopeNotify, scopes)
	require.Equal(t, "notify", scopes.String())

	for _, miss := range []string{"", "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa1 ", "chat-eu:aaaaaaaaaaaaaaaa1", "AAAAAAAAAAAAAAAA1", "cccccccccccccccc1:erase"} {
		_, _, ok := s.lookup(miss)
		require.False(t, ok, "%q", miss)
	}
}

// TestEmptyTokenFileRefusesEveryone: a file with no token (empty, or only
// comments) is a valid lock-down, not an error: no token matches.
func TestEmptyTokenFileRefusesEveryone(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"", "# every client removed\n\n"} {
		s, err := parseTokens([]byte(file))
		require.NoError(t, err)
		_, _, ok := s.lookup(strings.Repeat("x", 16))
		require.False(t, ok)
	}
}

func TestParseClientScopes(t *testing.T) {
	t.Parallel()
	m, err := parseClientScopes([]byte("# mTLS clients\nchat-web\nCN=ops,O=Example:erase,read\n  analytics : read \n"))
	require.NoError(t, err)
	require.Equal(t, map[string]Scope{"chat-web": DefaultScopes, "CN=ops,O=Example": ScopeErase | ScopeRead, "analytics": ScopeRead}, m)
	for _, c := range []struct{ file, want string }{
		{"a:writ\n", "line 1: scope 1 of the list is not one of mark, notify, read, watch, erase (or write: mark and notify)"},
		{"a:\n", "line 1: scope 1 of the list"},
		{":read\n", "line 1: subject of 0 characters"},
		{"a\nb\na:read\n", `line 3: subject "a" again (first on line 1)`},
	} {
		_, err := parseClientScopes([]byte(c.file))
		require.ErrorContains(t, err, c.want, "file %q", c.file)
	}
}

func TestParseTokensRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, want string }{
		{"svc:" + strings.Repeat("x", 16) + ":wirte\n", "line 1: scope 1 of the list is not one of mark, notify, read, watch, erase (or write: mark and notify)"},
		{"svc:" + strings.Repeat("x", 16) + ":read,\n", "line 1: scope 2 of the list"},
		{"svc:" + strings.Repeat("x", 16) + ":\n", "a token cannot contain ':'"},
		{"svc:abc:" + strings.Repeat("x", 16) + "\n", "line 1: scope 1 of the list"},
		{"svc:" + strings.Repeat("x", 16) + ":read:write\n", "line 1: scope 1 of the list"},
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

// TestRejectsDoNotEchoSecrets: an unparsable line's error names the line,
// never its text, which may hold a token or part of one.
func TestRejectsDoNotEchoSecrets(t *testing.T) {
	t.Parallel()
	const secret = "Zq9secretpart"
	for _, file := range []string{"svc:" + secret + ":" + secret + "\n", "svc:" + strings.Repeat("x", 16) + ":" + secret + "\n", secret + "\n"} {
		_, err := parseTokens([]byte(file))
		require.Error(t, err)
		require.NotContains(t, err.Error(), secret, "file %q", file)
	}
}
