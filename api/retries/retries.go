// Package retries is the one table of which calls of the ReceiptService
// a client may retry blindly (retries.json): the Go client (pkg/client)
// reads it here, and make generate writes the TypeScript client's copy
// (clients/ts/src/gen/retries.ts) from the same file, so both clients
// retry alike against one gateway.
package retries

import (
	_ "embed" // the table
	"encoding/json"
	"fmt"
	"strings"
)

// Policy says when a failed call is retried.
type Policy string

// The policies (retries.json explains each).
const (
	// Blind: on every refusal that says "later"; a repeat leaves the
	// same state as one call.
	Blind Policy = "blind"
	// Once: only when the request never left, or the gateway refused it
	// before writing anything; a repeat could undo a later change.
	Once Policy = "once"
)

//go:embed retries.json
var tableJSON []byte

// table is retries.json as read.
type table struct {
	About    string            `json:"about"`
	Policies map[Policy]string `json:"policies"`
	Methods  map[string]Policy `json:"methods"`
}

var methods = mustParse(tableJSON)

func mustParse(b []byte) map[string]Policy {
	var t table
	if err := json.Unmarshal(b, &t); err != nil {
		panic(fmt.Sprintf("retries.json: %v", err))
	}
	for m, p := range t.Methods {
		if p != Blind && p != Once {
			panic(fmt.Sprintf("retries.json: %s has policy %q, not blind or once", m, p))
		}
	}
	return t.Methods
}

// Of is the policy of a method, by name ("MarkRead") or procedure
// ("/receipts.v1.ReceiptService/MarkRead"). A method the table does not
// know is Once: a call nobody said may be repeated is not.
func Of(method string) Policy {
	method = method[strings.LastIndexByte(method, '/')+1:]
	if p, ok := methods[method]; ok {
		return p
	}
	return Once
}

// Methods is the table: each method's name and policy.
func Methods() map[string]Policy {
	out := make(map[string]Policy, len(methods))
	for m, p := range methods {
		out[m] = p
	}
	return out
}

// JSON is retries.json, byte for byte.
func JSON() []byte { return append([]byte(nil), tableJSON...) }
