package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoregistry"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apiauth"
)

// TestEveryProcedureHasAScope holds procedureScopes to the service's
// descriptor: a new RPC without a scope, or a scope for an RPC that is
// gone, fails here.
func TestEveryProcedureHasAScope(t *testing.T) {
	t.Parallel()
	svc := receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService")
	require.NotNil(t, svc)
	methods := svc.Methods()
	procedures := map[string]bool{}
	for i := range methods.Len() {
		m := methods.Get(i)
		proc := "/" + string(svc.FullName()) + "/" + string(m.Name())
		procedures[proc] = true
		scope, ok := procedureScopes[proc]
		require.True(t, ok, "%s has no scope in procedureScopes", proc)
		require.Contains(t, []apiauth.Scope{apiauth.ScopeMark, apiauth.ScopeNotify, apiauth.ScopeRead, apiauth.ScopeWatch, apiauth.ScopeErase}, scope,
			"%s needs exactly one scope", proc)
		if m.IsStreamingServer() {
			require.Equal(t, apiauth.ScopeWatch, scope, "%s is a stream", proc)
		}
	}
	for proc := range procedureScopes {
		require.True(t, procedures[proc], "procedureScopes names %s, which the service does not have", proc)
	}
	// Erasure, and only erasure, needs a scope no default grants.
	for proc, scope := range procedureScopes {
		if strings.HasSuffix(proc, "/EraseUser") {
			require.Equal(t, apiauth.ScopeErase, scope)
		} else {
			require.True(t, apiauth.DefaultScopes.Has(scope), "%s", proc)
		}
	}
}

// TestEndUserRules holds endUserRules to procedureScopes: an end-user
// token may call exactly the procedures whose scope it holds, each with a
// rule that reads the request's user ids or channels; notices, deletions,
// membership and erasure stay with server tokens. Each rule reads a
// request of its procedure's type.
func TestEndUserRules(t *testing.T) {
	t.Parallel()
	svc := receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService")
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		proc := "/" + string(svc.FullName()) + "/" + string(m.Name())
		rule, ok := endUserRules[proc]
		holds := apiauth.EndUserScopes.Has(procedureScopes[proc])
		require.Equal(t, holds, ok, "%s: an end-user token holds its scope (%v) iff it has a rule", proc, holds)
		require.Equal(t, holds, EndUserMay(proc), proc)
		if !ok {
			continue
		}
		require.True(t, rule.users != nil || rule.channels != nil, "%s: a rule checks something", proc)
		req, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		require.NoError(t, err)
		msg := req.New().Interface()
		require.NotPanics(t, func() {
			if rule.users != nil {
				rule.users(msg)
			}
			if rule.channels != nil {
				rule.channels(msg)
			}
		}, proc)
		// A call on a user's own state names its user; a read of
		// receipts or a watch names channels.
		if m.Input().Fields().ByName("user_id") != nil {
			require.NotNil(t, rule.users, "%s has a user_id: it must be the token's", proc)
		}
	}
	for _, server := range []string{"NotifyMessage", "NotifyMessages", "NotifyThreadReply", "DeleteMessage", "DeleteThreadReply", "JoinChannel", "LeaveChannel", "EraseUser"} {
		require.False(t, EndUserMay("/receipts.v1.ReceiptService/"+server), server)
	}
}

// A rule's paths are resolved against the request when the binary starts:
// a field the request lacks, a repeated field without "[]" (or "[]" on a
// single one), or a path ending on a message is refused; a resolved path
// reads every id and names it as the request does.
func TestAccessPaths(t *testing.T) {
	t.Parallel()
	md := (&receiptsv1.MarkReceiptsRequest{}).ProtoReflect().Descriptor()
	for _, bad := range []string{"nope", "receipts.user_id", "receipts[].nope", "receipts[]", "receipts[].user_id[]", "receipts[].user_id.x"} {
		_, err := fieldPaths(md, []string{bad})
		require.Error(t, err, bad)
	}
	paths, err := fieldPaths(md, []string{"receipts[].user_id"})
	require.NoError(t, err)
	req := &receiptsv1.MarkReceiptsRequest{Receipts: []*receiptsv1.Receipt{{UserId: "a"}, {UserId: "b"}}}
	require.Equal(t, []idField{{"receipts[0].user_id", "a"}, {"receipts[1].user_id", "b"}}, idsAt(req, paths))

	lookup := (&receiptsv1.LookupReceiptsRequest{}).ProtoReflect().Descriptor()
	paths, err = fieldPaths(lookup, []string{"badge_user_ids[]", "messages[].channel_id"})
	require.NoError(t, err)
	require.Equal(t, []idField{{"badge_user_ids[0]", "u"}, {"messages[0].channel_id", "c"}},
		idsAt(&receiptsv1.LookupReceiptsRequest{BadgeUserIds: []string{"u"}, Messages: []*receiptsv1.MessageRef{{ChannelId: "c"}}}, paths))

	// The service's own rules all resolve.
	_, _, err = accessRules(receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService"))
	require.NoError(t, err)
}
