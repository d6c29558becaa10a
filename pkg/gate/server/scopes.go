package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
)

// authorizer checks calls: the scope of procedureScopes, and for an
// end-user token the request itself (endUserRules), with members to ask
// about channels.
type authorizer struct{ members Memberships }

// authorize returns nil when the caller may make the call with msg (the
// request message), else PermissionDenied (HTTP 403) naming the call and
// what is missing: SCOPE_MISSING with the missing scope (metadata
// "scope"), or for an end-user token NOT_YOUR_USER or NOT_A_MEMBER with
// the field. A procedure the table lacks is refused: a call nobody gave a
// scope is nobody's to make. A server token's call costs a map lookup;
// only an end-user token's request is read.
func (a authorizer) authorize(ctx context.Context, procedure string, msg any) error {
	call, need, err := scope(ctx, procedure)
	if err != nil {
		return err
	}
	if c, ok := apiauth.ClientFrom(ctx); ok && c.User != "" {
		return a.ownOnly(ctx, c, procedure, call, need, msg)
	}
	return nil
}

// scope checks the caller's scope for procedure; it returns the call's
// name and the scope it needs.
func scope(ctx context.Context, procedure string) (string, apiauth.Scope, error) {
	call := procedure[strings.LastIndexByte(procedure, '/')+1:]
	need, ok := procedureScopes[procedure]
	if !ok {
		return call, 0, apierr.New(connect.CodePermissionDenied, apierr.ScopeMissing, fmt.Errorf("permission denied: %s has no scope in the API's table", call))
	}
	if err := apiauth.Require(ctx, call, need); err != nil {
		var missing apiauth.Scope
		if fe, ok := errors.AsType[*apiauth.ForbiddenError](err); ok {
			missing = fe.Missing
		}
		return call, need, apierr.New(connect.CodePermissionDenied, apierr.ScopeMissing, err, apierr.Meta{Key: apierr.KeyScope, Value: missing.String()})
	}
	return call, need, nil
}

// WrapUnary checks every unary call before its handler runs.
func (a authorizer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.authorize(ctx, req.Spec().Procedure, req.Any()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (authorizer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler checks a stream's scope before its handler runs,
// and an end-user token's request as the handler receives it.
func (a authorizer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		procedure := conn.Spec().Procedure
		call, need, err := scope(ctx, procedure)
		if err != nil {
			return err
		}
		if c, ok := apiauth.ClientFrom(ctx); ok && c.User != "" {
			conn = &checkedConn{StreamingHandlerConn: conn, check: func(msg any) error {
				return a.ownOnly(ctx, c, procedure, call, need, msg)
			}}
		}
		return next(ctx, conn)
	}
}

// checkedConn checks each request message a stream's handler receives.
type checkedConn struct {
	connect.StreamingHandlerConn
	check func(msg any) error
}

func (c *checkedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	return c.check(msg)
}

// ScopeOf is the scope a procedure of the ReceiptService needs
// ("/receipts.v1.ReceiptService/MarkRead"), from the one table.
func ScopeOf(procedure string) (apiauth.Scope, bool) {
	s, ok := procedureScopes[procedure]
	return s, ok
}

// EndUserMay reports whether an end-user token may call a procedure at
// all (on its own user, or its user's channels; see endUserRules).
func EndUserMay(procedure string) bool {
	_, ok := endUserRules[procedure]
	return ok && apiauth.EndUserScopes.Has(procedureScopes[procedure])
}
