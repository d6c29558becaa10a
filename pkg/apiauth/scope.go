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
	// ScopeMark changes a user's own read state on the user's behalf:
	// marks, mark-unread, read-all, thread marks and follows, settings,
	// notification levels.
	ScopeMark Scope = 1 << iota
	// ScopeNotify tells what happened in a channel: message notices,
	// deletions, membership. Kept apart from ScopeMark so that a tier that
	// relays users' reads cannot move heads or members.
	ScopeNotify
	// ScopeRead reads read state: read state, unread counts, receipts,
	// ticks, lookups.
	ScopeRead
	// ScopeWatch opens watch streams.
	ScopeWatch
	// ScopeErase erases a user's data. Never granted by default: a token
	// or certificate has it only when its line names it.
	ScopeErase

	// ScopeWrite is what the scope name "write" of older files grants:
	// mark and notify.
	ScopeWrite = ScopeMark | ScopeNotify
	// DefaultScopes is what a token or certificate line that names no
	// scopes grants.
	DefaultScopes = ScopeMark | ScopeNotify | ScopeRead | ScopeWatch
	// EndUserScopes is what an end-user token (a JWT) holds, always on
	// its own user only (the transport checks that): never notices,
	// deletions, membership or erasure.
	EndUserScopes = ScopeMark | ScopeRead | ScopeWatch
	// AllScopes is every scope: what a caller of an open API (no
	// authentication configured) holds.
	AllScopes = DefaultScopes | ScopeErase
)

// scopeNames are the scopes' names in files and messages, in bit order.
var scopeNames = [...]string{"mark", "notify", "read", "watch", "erase"}

// scopeAliases are names a file may use for a set of scopes.
var scopeAliases = map[string]Scope{"write": ScopeWrite}

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

// ParseScopes reads a comma-separated list of scope names (mark, notify,
// read, watch, erase; write is mark and notify). An empty list or an
// unknown name is an error; the error does not repeat the text, which may
// be part of a mistyped secret.
func ParseScopes(list string) (Scope, error) {
	var s Scope
	for i, name := range strings.Split(list, ",") {
		bits, ok := scopeNamed(strings.TrimSpace(name))
		if !ok {
			return 0, fmt.Errorf("scope %d of the list is not one of %s (or write: mark and notify)", i+1, strings.Join(scopeNames[:], ", "))
		}
		s |= bits
	}
	return s, nil
}

func scopeNamed(name string) (Scope, bool) {
	for bit, n := range scopeNames {
		if name == n {
			return 1 << bit, true
		}
	}
	s, ok := scopeAliases[name]
	return s, ok
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
