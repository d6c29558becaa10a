package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	rv1 "github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/apierr"
)

// procedureScopes is the one table of what each call of the ReceiptService
// needs: every protocol (gRPC, gRPC-Web, Connect, the REST routes vanguard
// transcodes, the fast REST path and the server-sent events route) checks
// this scope before the handler runs. A test holds it to the service's
// descriptor, so a new RPC without a scope fails the build's tests; at run
// time a procedure missing from it is refused (authorize).
var procedureScopes = map[string]apiauth.Scope{
	// write: marks, message notices, membership, settings.
	rv1.ReceiptServiceMarkReceiptsProcedure:      apiauth.ScopeWrite,
	rv1.ReceiptServiceMarkReadProcedure:          apiauth.ScopeWrite,
	rv1.ReceiptServiceMarkDeliveredProcedure:     apiauth.ScopeWrite,
	rv1.ReceiptServiceMarkUnreadProcedure:        apiauth.ScopeWrite,
	rv1.ReceiptServiceReadAllProcedure:           apiauth.ScopeWrite,
	rv1.ReceiptServiceNotifyMessageProcedure:     apiauth.ScopeWrite,
	rv1.ReceiptServiceNotifyMessagesProcedure:    apiauth.ScopeWrite,
	rv1.ReceiptServiceDeleteMessageProcedure:     apiauth.ScopeWrite,
	rv1.ReceiptServiceDeleteThreadReplyProcedure: apiauth.ScopeWrite,
	rv1.ReceiptServiceJoinChannelProcedure:       apiauth.ScopeWrite,
	rv1.ReceiptServiceLeaveChannelProcedure:      apiauth.ScopeWrite,
	rv1.ReceiptServiceUpdateSettingsProcedure:    apiauth.ScopeWrite,
	// write: threads.
	rv1.ReceiptServiceNotifyThreadReplyProcedure: apiauth.ScopeWrite,
	rv1.ReceiptServiceMarkThreadReadProcedure:    apiauth.ScopeWrite,
	rv1.ReceiptServiceMarkThreadUnreadProcedure:  apiauth.ScopeWrite,
	rv1.ReceiptServiceFollowThreadProcedure:      apiauth.ScopeWrite,
	rv1.ReceiptServiceUnfollowThreadProcedure:    apiauth.ScopeWrite,
	// write: notification levels.
	rv1.ReceiptServiceSetNotificationsProcedure: apiauth.ScopeWrite,
	// read: read state, unread, receipts, ticks, lookups, channel and
	// settings views.
	rv1.ReceiptServiceGetReadStateProcedure:             apiauth.ScopeRead,
	rv1.ReceiptServiceGetUnreadProcedure:                apiauth.ScopeRead,
	rv1.ReceiptServiceGetChannelProcedure:               apiauth.ScopeRead,
	rv1.ReceiptServiceGetMessageReceiptsProcedure:       apiauth.ScopeRead,
	rv1.ReceiptServiceGetTicksProcedure:                 apiauth.ScopeRead,
	rv1.ReceiptServiceLookupReceiptsProcedure:           apiauth.ScopeRead,
	rv1.ReceiptServiceGetSettingsProcedure:              apiauth.ScopeRead,
	rv1.ReceiptServiceListThreadsProcedure:              apiauth.ScopeRead,
	rv1.ReceiptServiceGetInboxProcedure:                 apiauth.ScopeRead,
	rv1.ReceiptServiceGetThreadMessageReceiptsProcedure: apiauth.ScopeRead,
	rv1.ReceiptServiceGetThreadTicksProcedure:           apiauth.ScopeRead,
	// watch: the watch streams (also GET /v1/channels:watch).
	rv1.ReceiptServiceWatchChannelsProcedure: apiauth.ScopeWatch,
	// erase: a user's erasure; never granted unless named.
	rv1.ReceiptServiceEraseUserProcedure: apiauth.ScopeErase,
}

// authorize returns nil when the caller holds the scope procedure needs,
// else PermissionDenied (HTTP 403, SCOPE_MISSING) naming the call and the
// missing scope (metadata "scope"). A procedure the table lacks is
// refused: a call nobody gave a scope is nobody's to make.
func authorize(ctx context.Context, procedure string) error {
	call := procedure[strings.LastIndexByte(procedure, '/')+1:]
	need, ok := procedureScopes[procedure]
	if !ok {
		return apierr.New(connect.CodePermissionDenied, apierr.ScopeMissing, fmt.Errorf("permission denied: %s has no scope in the API's table", call))
	}
	if err := apiauth.Require(ctx, call, need); err != nil {
		var missing apiauth.Scope
		if fe, ok := errors.AsType[*apiauth.ForbiddenError](err); ok {
			missing = fe.Missing
		}
		return apierr.New(connect.CodePermissionDenied, apierr.ScopeMissing, err, apierr.Meta{Key: apierr.KeyScope, Value: missing.String()})
	}
	return nil
}

// scopeInterceptor checks every call's scope before its handler runs,
// unary or streaming.
type scopeInterceptor struct{}

func (scopeInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := authorize(ctx, req.Spec().Procedure); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (scopeInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (scopeInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := authorize(ctx, conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// ScopeOf is the scope a procedure of the ReceiptService needs
// ("/receipts.v1.ReceiptService/MarkRead"), from the one table.
func ScopeOf(procedure string) (apiauth.Scope, bool) {
	s, ok := procedureScopes[procedure]
	return s, ok
}
