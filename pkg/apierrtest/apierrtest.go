// Package apierrtest asserts a refusal's code and reason in one line, for
// every protocol a test calls the API with. Only _test.go files import it.
package apierrtest

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/readstate/receipts/pkg/apierr"
)

// Refused asserts that err (from a gRPC, gRPC-Web or Connect client, or a
// handler) has code and an ErrorInfo of reason. msgAndArgs are testify's.
func Refused(t testing.TB, err error, code connect.Code, reason apierr.Reason, msgAndArgs ...any) {
	t.Helper()
	what := describe(fmt.Sprintf("error %v", err), msgAndArgs)
	require.Equal(t, code.String(), connect.CodeOf(err).String(), "code of %s", what)
	require.Equal(t, reason, apierr.ReasonOf(err), "reason of %s", what)
}

// RefusedREST asserts that a REST answer has HTTP status and a body whose
// ErrorInfo is of reason.
func RefusedREST(t testing.TB, status int, body []byte, wantStatus int, reason apierr.Reason, msgAndArgs ...any) {
	t.Helper()
	what := describe(fmt.Sprintf("body %s", body), msgAndArgs)
	require.Equal(t, wantStatus, status, "status of %s", what)
	require.Equal(t, string(reason), apierr.InfoOfREST(body).GetReason(), "reason of %s", what)
}

func describe(answer string, msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return answer
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(format, msgAndArgs[1:]...) + ": " + answer
	}
	return fmt.Sprint(msgAndArgs...) + ": " + answer
}
