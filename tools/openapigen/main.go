// Command openapigen is the buf plugin that writes the REST contract,
// api/openapi.json (buf.gen.yaml runs it, scripts/generate.sh runs buf).
// gnostic's protoc-gen-openapi builds an OpenAPI 3 document from the
// google.api.http rules of every proto file buf hands it, with the JSON
// names and enum spellings protojson uses; openapigen then replaces the
// error schema with the body the gateway writes (google.rpc.Status whose
// details include google.rpc.ErrorInfo) and writes the document as
// indented JSON, the bytes kafkagate serves at GET /openapi.json.
//
// Nothing in it names a route: a new rule in the proto lands in the
// document by make generate alone.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/google/gnostic/cmd/protoc-gen-openapi/generator"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/pluginpb"
)

// outputName is the document's path under the plugin's out directory.
const outputName = "openapi.json"

func main() {
	var flags flag.FlagSet
	title := flags.String("title", "", "the API's title")
	version := flags.String("version", "", "the API's version")
	protogen.Options{ParamFunc: flags.Set}.Run(func(plugin *protogen.Plugin) error {
		plugin.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		doc, err := gnosticDocument(plugin, *title, *version)
		if err != nil {
			return err
		}
		out, err := reshape(doc)
		if err != nil {
			return err
		}
		_, err = plugin.NewGeneratedFile(outputName, "").Write(out)
		return err
	})
}

// gnosticDocument runs gnostic's generator over the files to generate and
// returns its YAML, which is not written out.
func gnosticDocument(plugin *protogen.Plugin, title, version string) ([]byte, error) {
	var (
		naming          = "json"   // protojson's lowerCamelCase field names
		enumType        = "string" // protojson writes enum names (and reads numbers too)
		depth           = 2
		defaultResponse = true // every operation's default answer is the error body
		fqNames         = false
		description     = ""
		outputMode      = "merged"
	)
	conf := generator.Configuration{
		Version: &version, Title: &title, Description: &description, Naming: &naming,
		FQSchemaNaming: &fqNames, EnumType: &enumType, CircularDepth: &depth,
		DefaultResponse: &defaultResponse, OutputMode: &outputMode,
	}
	scratch := plugin.NewGeneratedFile("gnostic.yaml", "")
	scratch.Skip()
	var files []*protogen.File
	for _, f := range plugin.Files {
		if f.Generate {
			files = append(files, f)
		}
	}
	if err := generator.NewOpenAPIv3Generator(plugin, conf, files).Run(scratch); err != nil {
		return nil, fmt.Errorf("gnostic: %w", err)
	}
	return scratch.Content()
}

// errorSchemas describe the REST error body as the gateway writes it
// (vanguard for transcoded routes, pkg/gate/rest on the fast path, the
// server for bodies it refuses before decoding): they replace gnostic's
// Status, whose details are untyped.
const errorSchemas = `
Status:
  type: object
  description: >-
    The body of every REST error: google.rpc.Status in JSON. The HTTP status
    follows code: 400 INVALID_ARGUMENT, FAILED_PRECONDITION and OUT_OF_RANGE;
    401 UNAUTHENTICATED; 403 PERMISSION_DENIED; 404 NOT_FOUND; 409 ABORTED
    and ALREADY_EXISTS; 413 RESOURCE_EXHAUSTED for a body over the size
    limit; 429 RESOURCE_EXHAUSTED over a rate limit (with Retry-After);
    499 CANCELLED; 501 UNIMPLEMENTED; 503 UNAVAILABLE; 504
    DEADLINE_EXCEEDED; 500 otherwise.
  required: [code, message]
  properties:
    code:
      type: integer
      format: int32
      description: The google.rpc.Code number (3 INVALID_ARGUMENT, 7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED, 14 UNAVAILABLE, ...).
    message:
      type: string
      description: A developer-facing explanation, in English; not stable (branch on code and ErrorInfo.reason instead).
    details:
      type: array
      description: >-
        Typed objects that qualify the error, each naming its type in @type.
        A refusal by the service carries a google.rpc.ErrorInfo.
      items:
        anyOf:
          - $ref: '#/components/schemas/ErrorInfo'
          - $ref: '#/components/schemas/GoogleProtobufAny'
ErrorInfo:
  type: object
  description: google.rpc.ErrorInfo, the machine-readable cause of a refusal.
  required: ['@type', reason, domain]
  properties:
    '@type':
      type: string
      enum: [type.googleapis.com/google.rpc.ErrorInfo]
    reason:
      type: string
      description: The cause as an UPPER_SNAKE_CASE constant, stable across releases.
    domain:
      type: string
      description: Who refused; receipts.v1 for this service.
      example: receipts.v1
    metadata:
      type: object
      description: Facts about the refusal (for example the field at fault), as strings.
      additionalProperties:
        type: string
`

// errorResponseDescription replaces gnostic's "Default error response".
const errorResponseDescription = "An error, as google.rpc.Status (see the Status schema for the HTTP status of each code)."

// reshape puts errorSchemas in place of gnostic's Status, describes each
// operation's default response as the error, and encodes the document as
// JSON, keys in gnostic's order.
func reshape(gnosticYAML []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(gnosticYAML, &doc); err != nil {
		return nil, fmt.Errorf("reading gnostic's document: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("gnostic's document is not one YAML document")
	}
	schemas := lookup(doc.Content[0], "components", "schemas")
	if schemas == nil || lookup(schemas, "Status") == nil || lookup(schemas, "GoogleProtobufAny") == nil {
		return nil, errors.New("gnostic's document has no Status and GoogleProtobufAny schemas to replace (default_response off?)")
	}
	var replacements yaml.Node
	if err := yaml.Unmarshal([]byte(errorSchemas), &replacements); err != nil {
		return nil, fmt.Errorf("reading the error schemas: %w", err)
	}
	repl := replacements.Content[0]
	for i := 0; i < len(repl.Content); i += 2 {
		set(schemas, repl.Content[i].Value, repl.Content[i+1])
	}
	sortMapping(schemas)
	if paths := lookup(doc.Content[0], "paths"); paths != nil {
		for i := 1; i < len(paths.Content); i += 2 {
			ops := paths.Content[i]
			for j := 1; j < len(ops.Content); j += 2 {
				if d := lookup(ops.Content[j], "responses", "default"); d != nil {
					set(d, "description", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: errorResponseDescription})
				}
			}
		}
	}

	var out bytes.Buffer
	if err := writeJSON(&out, doc.Content[0]); err != nil {
		return nil, err
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, out.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("indenting the document: %w", err)
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}

// lookup follows keys through nested mappings; nil when one is missing.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// set replaces key's value in mapping m, or appends the pair.
func set(m *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}

// sortMapping orders m's pairs by key, as gnostic orders schemas.
func sortMapping(m *yaml.Node) {
	type pair struct{ k, v *yaml.Node }
	pairs := make([]pair, 0, len(m.Content)/2)
	for i := 0; i < len(m.Content); i += 2 {
		pairs = append(pairs, pair{m.Content[i], m.Content[i+1]})
	}
	slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.k.Value, b.k.Value) })
	m.Content = m.Content[:0]
	for _, p := range pairs {
		m.Content = append(m.Content, p.k, p.v)
	}
}

// writeJSON encodes n as compact JSON, mapping keys in document order.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeScalar(b, n.Content[i].Value); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		return writeScalar(b, v)
	default:
		return fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
	}
	return nil
}

// writeScalar writes v as JSON without HTML escaping (descriptions keep
// their < and >).
func writeScalar(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}
