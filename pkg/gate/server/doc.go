// Package server is kafkagate's transport: it serves a gate.Gate's
// ReceiptService on one port as gRPC, gRPC-Web, Connect and HTTP/JSON
// (REST routes from the google.api.http annotations, transcoded by
// vanguard, with the hot write routes on the fast codec of pkg/gate/rest),
// WatchChannels also as server-sent events, with gRPC reflection and
// health, and its REST contract (the OpenAPI document of package api) at
// GET /openapi.json.
//
// Every route but /openapi.json (public metadata) sits behind the API
// guard (pkg/apiauth, Config.Auth): bearer tokens or mTLS, each call
// checked against the scope its procedure's (receipts.v1.access) option
// gives it (access.go reads the rules from the service's descriptor), and per-client rate limits in events (a batch costs its
// items, charged once decoded). REST bodies are bounded (Config.MaxBodyBytes:
// HTTP 413 before any decoding) and REST errors are google.rpc.Status JSON
// with the refusal's ErrorInfo, as vanguard writes them (apierr.WriteREST
// on the paths vanguard does not answer).
// Browser pages of the origins in Config.CORSAllowedOrigins may call the
// API (cors.go): their preflights are answered before the guard, their
// calls still need credentials.
// Readiness is the gate's, once the server serves; on shutdown the server
// is unready at once (gRPC health NOT_SERVING) but keeps serving for
// Config.ShutdownDelay, while load balancers stop routing to it, then ends
// the watch streams (clients resume with their last token) and drains
// in-flight calls for up to Config.ShutdownTimeout.
package server
