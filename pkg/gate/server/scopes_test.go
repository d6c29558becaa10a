package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
		require.Contains(t, []apiauth.Scope{apiauth.ScopeWrite, apiauth.ScopeRead, apiauth.ScopeWatch, apiauth.ScopeErase}, scope,
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
