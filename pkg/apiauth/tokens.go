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
// comparison has one length, and the client name of each.
type tokenSet struct {
	digests [][sha256.Size]byte
	names   []string
}

// lookup returns the client name of token. It compares token with every
// accepted one in constant time and never stops early, so the answer's
// timing says nothing about which token, or how much of one, matched.
func (s *tokenSet) lookup(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.digests {
		if subtle.ConstantTimeCompare(d[:], s.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return s.names[found], true
}

// loadTokens reads a token file: one token a line, or name:token to name
// the client (several tokens may share a name, for rotation); blank lines
// and lines starting with # are skipped. A token without a name is named
// by the first 8 hex digits of its SHA-256, which identifies it in logs
// without revealing it.
func loadTokens(path string) (*tokenSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading token file %s: %w", path, err)
	}
	if len(data) > MaxTokenFileBytes {
		return nil, fmt.Errorf("token file %s: larger than %d bytes", path, MaxTokenFileBytes)
	}
	s, err := parseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return s, nil
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
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading lines: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(s.digests) == 0 {
		return nil, errors.New("no tokens (one a line, or name:token); an empty file would refuse every client")
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
