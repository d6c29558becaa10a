// Package api holds the REST contract of the receipts API: openapi.json,
// the OpenAPI 3 document that make generate writes from the proto's
// google.api.http rules (tools/openapigen), with the JSON shapes protojson
// reads and writes and the error body every REST route answers. The
// gateway serves it at GET /openapi.json; make verify fails when it is
// stale, and this package's test holds it valid and route for route equal
// to the rules.
package api

import _ "embed" // the document

//go:embed openapi.json
var openAPIJSON string

// OpenAPIJSON is the document, byte for byte as committed.
func OpenAPIJSON() string { return openAPIJSON }
