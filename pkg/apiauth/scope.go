package apiauth

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Scope is a set of the kinds of call a client may make. The API's
// transport maps each of its procedures to the one scope it needs (for the
// ReceiptService: pkg/gate/server, procedureScopes); a token or client
// certificate carries a set.
type Scope uint8

// The scopes.
const (
	// ScopeWrite changes read state: marks, message notices, membership,
	// settings, mark-unread, read-all.
	ScopeWrite Scope = 1 << iota
	// ScopeRead reads it: read state, unread counts, receipts, ticks,
	// lookups.
	ScopeRead
	// ScopeWatch opens watch streams.
	ScopeWatch
	// ScopeErase erases a user's data. Never granted by default: a token
	// or certificate has it only when its line names it.
	ScopeErase

	// DefaultScopes is what a token or certificate line that names no
	// scopes grants.
	DefaultScopes = ScopeWrite | ScopeRead | ScopeWatch
	// AllScopes is every scope: what a caller of an open API (no
	// authentication configured) holds.
	AllScopes = ScopeWrite | ScopeRead | ScopeWatch | ScopeErase
)

// scopeNames are the scopes' names in files and messages, in bit order.
var scopeNames = [...]string{"write", "read", "watch", "erase"}

// String lists the scopes by name, comma-separated ("none" for none).
func (s Scope) String() string {
	var names []string
	for i, n := range scopeNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Has reports whether s holds every scope of need.
func (s Scope) Has(need Scope) bool { return s&need == need }

// ParseScopes reads a comma-separated list of scope names (write, read,
// watch, erase). An empty list or an unknown name is an error; the error
// does not repeat the text, which may be part of a mistyped secret.
func ParseScopes(list string) (Scope, error) {
	var s Scope
	for i, name := range strings.Split(list, ",") {
		found := false
		for bit, n := range scopeNames {
			if strings.TrimSpace(name) == n {
				s |= 1 << bit
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("scope %d of the list is not one of %s", i+1, strings.Join(scopeNames[:], ", "))
		}
	}
	return s, nil
}

// ForbiddenError is a call its authenticated client lacks the scope of.
type ForbiddenError struct {
	Client  string
	Call    string
	Missing Scope
	Held    Scope
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("permission denied: %s needs the %q scope, which client %s lacks (it holds %s)", e.Call, e.Missing.String(), e.Client, e.Held)
}

// Require returns nil when the caller Wrap authenticated in ctx holds the
// scope need, and a *ForbiddenError naming the call and the missing scope
// otherwise (also without a caller in ctx: a route outside the guard has
// nothing to grant). The transport answers it as HTTP 403 /
// PermissionDenied.
func Require(ctx context.Context, call string, need Scope) error {
	c, ok := ClientFrom(ctx)
	if !ok {
		return &ForbiddenError{Client: "(none)", Call: call, Missing: need}
	}
	if c.Scopes.Has(need) {
		return nil
	}
	missing := need &^ c.Scopes
	c.g.m.forbidden.WithLabelValues(missing.String()).Inc()
	return &ForbiddenError{Client: c.Name, Call: call, Missing: missing, Held: c.Scopes}
}

// IsForbidden reports whether err is (or wraps) a *ForbiddenError.
func IsForbidden(err error) bool {
	_, ok := errors.AsType[*ForbiddenError](err)
	return ok
}
