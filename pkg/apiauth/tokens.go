package apiauth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Token file bounds: a file an operator writes by hand or from a Secret,
// never a database.
const (
	MaxTokenFileBytes = 1 << 20
	MaxTokens         = 1024
	MinTokenLength    = 16
	MaxTokenLength    = 512
	MaxNameLength     = 64
)

// tokenSet is the accepted bearer tokens, as SHA-256 digests so that every
// comparison has one length, and the client name and scopes of each. An
// empty set refuses every token.
type tokenSet struct {
	digests [][sha256.Size]byte
	names   []string
	scopes  []Scope
}

// lookup returns the client name and scopes of token. It compares token with every
// accepted one in constant time and never stops early, so the answer's
// timing says nothing about which token, or how much of one, matched.
func (s *tokenSet) lookup(token string) (string, Scope, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.digests {
		if subtle.ConstantTimeCompare(d[:], s.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", 0, false
	}
	return s.names[found], s.scopes[found], true
}

// loadTokens reads a token file, one token a line:
//
//	token                    unnamed, DefaultScopes
//	name:token               named, DefaultScopes (write, read, watch)
//	name:token:scope,scope   named, exactly the scopes listed
//
// Several tokens may share a name (rotation). Blank lines and lines
// starting with # are skipped. A token without a name is named by the first
// 8 hex digits of its SHA-256, which identifies it in logs without
// revealing it. A token cannot contain ':'. A file without any token loads
// as an empty set, which refuses every token.
func loadTokens(path string) (*tokenSet, error) {
	data, err := readBounded(path, "token file")
	if err != nil {
		return nil, err
	}
	s, err := parseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return s, nil
}

// readBounded reads a file of at most MaxTokenFileBytes; what names it in
// errors.
func readBounded(path, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", what, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, path, err)
	}
	if len(data) > MaxTokenFileBytes {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", what, path, MaxTokenFileBytes)
	}
	return data, nil
}

func parseTokens(data []byte) (*tokenSet, error) {
	s := &tokenSet{}
	firstLine := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxTokenFileBytes)
	var errs []error
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, token, named := strings.Cut(line, ":")
		if !named {
			name, token = "", line
		}
		scopes := DefaultScopes
		if tok, list, scoped := strings.Cut(token, ":"); scoped {
			token = tok
			var err error
			if scopes, err = ParseScopes(list); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w (a line is name:token or name:token:scope,scope; a token cannot contain ':')", n, err))
				continue
			}
		}
		if err := validToken(token); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		d := sha256.Sum256([]byte(token))
		if named {
			if err := validName(name); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", n, err))
				continue
			}
		} else {
			name = "token-" + hex.EncodeToString(d[:4])
		}
		if prev, dup := firstLine[d]; dup {
			errs = append(errs, fmt.Errorf("line %d: the same token as line %d", n, prev))
			continue
		}
		firstLine[d] = n
		if len(s.digests) == MaxTokens {
			return nil, fmt.Errorf("more than %d tokens", MaxTokens)
		}
		s.digests = append(s.digests, d)
		s.names = append(s.names, name)
		s.scopes = append(s.scopes, scopes)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading lines: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// validToken accepts printable ASCII without blanks (what fits an
// Authorization header unquoted), of a length a guess cannot reach.
func validToken(token string) error {
	if len(token) < MinTokenLength || len(token) > MaxTokenLength {
		return fmt.Errorf("token of %d characters; must be %d to %d", len(token), MinTokenLength, MaxTokenLength)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("token has a character outside printable ASCII at offset %d", i)
		}
	}
	return nil
}

// validName accepts the characters of an identifier, a host name or an
// e-mail address, so a name is safe in a log line.
func validName(name string) error {
	if name == "" || len(name) > MaxNameLength {
		return fmt.Errorf("client name of %d characters; must be 1 to %d", len(name), MaxNameLength)
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-', c == '@':
		default:
			return fmt.Errorf("client name %q: only letters, digits and . _ - @", name)
		}
	}
	return nil
}

// MaxSubjectLength bounds a certificate subject in the client scopes file.
const MaxSubjectLength = 256

// loadClientScopes reads a client scopes file: the scopes of mTLS clients
// by certificate subject (as the guard names a certificate client: its
// common name, else the whole subject), one a line:
//
//	subject                  DefaultScopes
//	subject:scope,scope      exactly the scopes listed
//
// The scopes follow the last ':', so a subject may contain one. Blank
// lines and lines starting with # are skipped. A certificate whose subject
// is not listed holds no scope.
func loadClientScopes(path string) (map[string]Scope, error) {
	data, err := readBounded(path, "client scopes file")
	if err != nil {
		return nil, err
	}
	m, err := parseClientScopes(data)
	if err != nil {
		return nil, fmt.Errorf("client scopes file %s: %w", path, err)
	}
	return m, nil
}

func parseClientScopes(data []byte) (map[string]Scope, error) {
	m := map[string]Scope{}
	firstLine := map[string]int{}
	var errs []error
	for n, raw := range strings.Split(string(data), "\n") {
		n++
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		subject, scopes := line, DefaultScopes
		if i := strings.LastIndexByte(line, ':'); i >= 0 {
			var err error
			if scopes, err = ParseScopes(line[i+1:]); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w (a line is subject or subject:scope,scope)", n, err))
				continue
			}
			subject = strings.TrimSpace(line[:i])
		}
		if subject == "" || len(subject) > MaxSubjectLength {
			errs = append(errs, fmt.Errorf("line %d: subject of %d characters; must be 1 to %d", n, len(subject), MaxSubjectLength))
			continue
		}
		if prev, dup := firstLine[subject]; dup {
			errs = append(errs, fmt.Errorf("line %d: subject %q again (first on line %d)", n, subject, prev))
			continue
		}
		firstLine[subject] = n
		if len(m) == MaxTokens {
			return nil, fmt.Errorf("more than %d subjects", MaxTokens)
		}
		m[subject] = scopes
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}
