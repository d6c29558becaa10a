package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/readstate/receipts/api"
	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/api/receipts/v1/receiptsv1connect"
)

// loadDocument parses and validates the committed document.
func loadDocument(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(api.OpenAPIJSON()))
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the document is not valid OpenAPI 3")
	return doc
}

// httpRoute is one REST route as the proto's http rules declare it.
type httpRoute struct {
	method    protoreflect.MethodDescriptor
	verb      string
	path      string   // OpenAPI spelling: variables by their JSON names
	pathVars  []string // JSON names, in order
	queryVars []string // the input's other fields, for routes without a body (JSON names)
	body      string
}

// templateVar matches a path template variable: {name} or {name=pattern}.
var templateVar = regexp.MustCompile(`\{([^}=]+)(=[^}]*)?\}`)

// protoRoutes are the REST routes of every service in the receipts proto
// package(s) registered in this binary, with additional bindings.
func protoRoutes(t *testing.T) map[string]httpRoute {
	t.Helper()
	routes := map[string]httpRoute{}
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(f.Package()), "receipts.") {
			return true
		}
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				m := svc.Methods().Get(j)
				rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
				if rule == nil {
					continue
				}
				for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
					route := newRoute(t, m, r)
					key := route.verb + " " + route.path
					require.NotContains(t, routes, key, "two rules bind %s", key)
					routes[key] = route
				}
			}
		}
		return true
	})
	require.NotEmpty(t, routes, "no http rule found: is the receipts proto registered?")
	return routes
}

func newRoute(t *testing.T, m protoreflect.MethodDescriptor, r *annotations.HttpRule) httpRoute {
	t.Helper()
	route := httpRoute{method: m, body: r.GetBody()}
	var template string
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		route.verb, template = http.MethodGet, p.Get
	case *annotations.HttpRule_Post:
		route.verb, template = http.MethodPost, p.Post
	case *annotations.HttpRule_Put:
		route.verb, template = http.MethodPut, p.Put
	case *annotations.HttpRule_Delete:
		route.verb, template = http.MethodDelete, p.Delete
	case *annotations.HttpRule_Patch:
		route.verb, template = http.MethodPatch, p.Patch
	default:
		t.Fatalf("%s: http rule pattern %T is not one OpenAPI can describe", m.FullName(), p)
	}
	covered := map[string]bool{}
	route.path = templateVar.ReplaceAllStringFunc(template, func(v string) string {
		name := templateVar.FindStringSubmatch(v)[1]
		fd := m.Input().Fields().ByName(protoreflect.Name(name))
		require.NotNil(t, fd, "%s: path variable %s is no field of %s", m.FullName(), name, m.Input().FullName())
		covered[name] = true
		route.pathVars = append(route.pathVars, fd.JSONName())
		return "{" + fd.JSONName() + "}"
	})
	if route.body == "" {
		for i := range m.Input().Fields().Len() {
			if fd := m.Input().Fields().Get(i); !covered[string(fd.Name())] {
				route.queryVars = append(route.queryVars, fd.JSONName())
			}
		}
	}
	return route
}

// TestOpenAPIDocumentMatchesTheHTTPRules: the document is valid OpenAPI 3
// and has one operation per http rule of the proto, nothing else: the
// rule's method and path, its path and query parameters by their JSON
// names, a request body exactly when the rule has one, the RPC's output
// message as the 200 answer and the error body as the default answer.
func TestOpenAPIDocumentMatchesTheHTTPRules(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	want := protoRoutes(t)

	var documented []string
	for path, item := range doc.Paths.Map() {
		for verb, op := range item.Operations() {
			key := verb + " " + path
			documented = append(documented, key)
			route, ok := want[key]
			if !ok {
				continue
			}
			m := route.method
			require.Equal(t, string(m.Parent().Name())+"_"+string(m.Name()), op.OperationID, key)
			var pathParams, queryParams []string
			for _, p := range op.Parameters {
				switch p.Value.In {
				case openapi3.ParameterInPath:
					pathParams = append(pathParams, p.Value.Name)
				case openapi3.ParameterInQuery:
					queryParams = append(queryParams, p.Value.Name)
				default:
					t.Errorf("%s: parameter %s in %s", key, p.Value.Name, p.Value.In)
				}
			}
			require.Equal(t, route.pathVars, pathParams, "%s: path parameters", key)
			require.ElementsMatch(t, route.queryVars, queryParams, "%s: query parameters", key)
			if route.body == "" {
				require.Nil(t, op.RequestBody, "%s: the rule has no body", key)
			} else {
				require.NotNil(t, op.RequestBody, "%s: the rule has a body", key)
				if route.body == "*" {
					require.Equal(t, "#/components/schemas/"+string(m.Input().Name()),
						op.RequestBody.Value.Content.Get("application/json").Schema.Ref, "%s: request body", key)
				}
			}
			ok200 := op.Responses.Status(http.StatusOK)
			require.NotNil(t, ok200, key)
			require.Equal(t, "#/components/schemas/"+string(m.Output().Name()),
				ok200.Value.Content.Get("application/json").Schema.Ref, "%s: answer", key)
			require.Equal(t, "#/components/schemas/Status",
				op.Responses.Default().Value.Content.Get("application/json").Schema.Ref, "%s: error", key)
		}
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(want)), documented,
		"the document's operations are not the proto's http rules: run make generate")
}

// unimplemented answers every RPC with Unimplemented, but GetSettings with
// a refusal carrying a google.rpc.ErrorInfo.
type unimplemented struct {
	receiptsv1connect.UnimplementedReceiptServiceHandler
}

func (unimplemented) GetSettings(context.Context, *connect.Request[receiptsv1.GetSettingsRequest]) (*connect.Response[receiptsv1.UserSettings], error) {
	cerr := connect.NewError(connect.CodeInvalidArgument, errors.New("user_id: not a valid id"))
	detail, err := connect.NewErrorDetail(&errdetails.ErrorInfo{
		Reason: "INVALID_ID", Domain: "receipts.v1", Metadata: map[string]string{"field": "user_id"},
	})
	if err != nil {
		return nil, err
	}
	cerr.AddDetail(detail)
	return nil, cerr
}

// transcoder is vanguard over h, as the gateway transcodes REST.
func transcoder(t *testing.T, h receiptsv1connect.ReceiptServiceHandler) http.Handler {
	t.Helper()
	path, handler := receiptsv1connect.NewReceiptServiceHandler(h)
	tc, err := vanguard.NewTranscoder([]*vanguard.Service{vanguard.NewService(path, handler)})
	require.NoError(t, err)
	return tc
}

// validateExchange checks a request and its answer against the document.
func validateExchange(doc *openapi3.T, path string, item *openapi3.PathItem, verb string, op *openapi3.Operation,
	params map[string]string, req *http.Request, body []byte, rec *httptest.ResponseRecorder,
) error {
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      &routers.Route{Spec: doc, Path: path, PathItem: item, Method: verb, Operation: op},
		Options:    &openapi3filter.Options{IncludeResponseStatus: true},
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                in.Options,
	})
}

// TestOpenAPIRoutesReachTheirRPC: each documented operation, called as the
// document says (path parameters filled, an empty JSON object as its
// body), reaches its own RPC through vanguard, and vanguard's error body
// is what the document describes, ErrorInfo details included. A body
// that is not the documented Status fails the same check.
func TestOpenAPIRoutesReachTheirRPC(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	tc := transcoder(t, unimplemented{})

	for path, item := range doc.Paths.Map() {
		for verb, op := range item.Operations() {
			params := map[string]string{}
			url := path
			for _, p := range op.Parameters {
				if p.Value.In == openapi3.ParameterInPath {
					params[p.Value.Name] = "7" // a valid id and a valid seq
					url = strings.ReplaceAll(url, "{"+p.Value.Name+"}", "7")
				}
			}
			var body []byte
			if op.RequestBody != nil {
				body = []byte(`{}`)
			}
			req := httptest.NewRequest(verb, url, bytes.NewReader(body))
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			tc.ServeHTTP(rec, req)

			rpc := strings.TrimPrefix(op.OperationID, "ReceiptService_")
			if rpc == "GetSettings" {
				require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
				require.JSONEq(t, `{"code":3,"message":"user_id: not a valid id","details":[{
					"@type":"type.googleapis.com/google.rpc.ErrorInfo",
					"reason":"INVALID_ID","domain":"receipts.v1","metadata":{"field":"user_id"}}]}`, rec.Body.String())
				// Any object with an @type passes details' anyOf: the
				// ErrorInfo schema itself must describe the detail.
				var status struct{ Details []map[string]any }
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &status))
				errorInfo := doc.Components.Schemas["ErrorInfo"].Value
				require.NoError(t, errorInfo.VisitJSON(status.Details[0]))
				delete(status.Details[0], "reason")
				require.Error(t, errorInfo.VisitJSON(status.Details[0]), "an ErrorInfo without reason")
			} else {
				require.Equal(t, http.StatusNotImplemented, rec.Code, "%s %s: %s", verb, url, rec.Body.String())
				require.Contains(t, rec.Body.String(), receiptsv1connect.ReceiptServiceName+"."+rpc+" is not implemented",
					"%s %s reaches another RPC", verb, url)
			}
			require.NoError(t, validateExchange(doc, path, item, verb, op, params, req, body, rec),
				"%s %s: %s", verb, url, rec.Body.String())

			// The same answer with a body the document does not describe
			// fails the check.
			bad := httptest.NewRecorder()
			bad.Header().Set("Content-Type", "application/json")
			bad.WriteHeader(rec.Code)
			_, _ = bad.WriteString(`{"code":"twelve","details":[{"reason":1}]}`)
			require.Error(t, validateExchange(doc, path, item, verb, op, params, req, body, bad), "%s %s", verb, url)
		}
	}
}
