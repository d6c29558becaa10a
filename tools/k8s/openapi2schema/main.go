// Command openapi2schema writes strict JSON schemas for kubeconform, offline,
// from the OpenAPI v2 spec that ships inside the k8s.io/kubernetes module
// (api/openapi-spec/swagger.json) and from CustomResourceDefinition manifests.
//
//	openapi2schema -swagger swagger.json [-crd crds.yaml ...] -out DIR
//
// One file per group/version/kind, named as kubeconform's schema-location
// template '{{ .ResourceKind }}{{ .KindSuffix }}.json' expects:
// deployment-apps-v1.json, service-v1.json, servicemonitor-monitoring-v1.json.
//
// Each definition that carries x-kubernetes-group-version-kind becomes a
// schema whose "definitions" hold every definition it references (kept as
// local $refs, so recursive types such as JSONSchemaProps stay finite).
// Strictness: every object with properties gets additionalProperties: false
// (unless a CRD marks it x-kubernetes-preserve-unknown-fields); IntOrString
// and Quantity become oneOf string/number; typed values also accept null, as
// the API server does.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// fileName is kubeconform's name for a kind: the kind in lower case, the
// first label of the group (none for the core group), the version.
func (g gvk) fileName() string {
	s := strings.ToLower(g.Kind)
	if g.Group != "" {
		s += "-" + strings.ToLower(strings.Split(g.Group, ".")[0])
	}
	return s + "-" + strings.ToLower(g.Version) + ".json"
}

type crdList []string

func (c *crdList) String() string     { return strings.Join(*c, ",") }
func (c *crdList) Set(s string) error { *c = append(*c, s); return nil }

func main() {
	swagger := flag.String("swagger", "", "path of the Kubernetes OpenAPI v2 spec (swagger.json)")
	out := flag.String("out", "", "directory to write the schemas into (created)")
	var crds crdList
	flag.Var(&crds, "crd", "CustomResourceDefinition manifest (YAML, several documents allowed); repeatable")
	flag.Parse()
	if *out == "" || (*swagger == "" && len(crds) == 0) {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*swagger, crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "openapi2schema:", err)
		os.Exit(1)
	}
}

func run(swaggerPath string, crds []string, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	written := map[string]string{} // file name → source, to catch collisions
	n := 0
	if swaggerPath != "" {
		c, err := fromSwagger(swaggerPath, out, written)
		if err != nil {
			return err
		}
		n += c
	}
	for _, p := range crds {
		c, err := fromCRDs(p, out, written)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		n += c
	}
	fmt.Fprintf(os.Stderr, "openapi2schema: %d schemas in %s\n", n, out)
	return nil
}

func fromSwagger(path, out string, written map[string]string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", path, err)
	}
	if len(spec.Definitions) == 0 {
		return 0, fmt.Errorf("%s has no definitions", path)
	}
	names := make([]string, 0, len(spec.Definitions))
	for name := range spec.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		def := spec.Definitions[name]
		gvks, err := gvksOf(def)
		if err != nil {
			return n, fmt.Errorf("%s: %w", name, err)
		}
		if len(gvks) == 0 {
			continue
		}
		deps := map[string]any{}
		if err := collect(def, spec.Definitions, deps); err != nil {
			return n, fmt.Errorf("%s: %w", name, err)
		}
		schema := strict(def, false).(map[string]any)
		if len(deps) > 0 {
			defs := map[string]any{}
			for d, v := range deps {
				defs[d] = strict(v, false)
			}
			schema["definitions"] = defs
		}
		schema["$schema"] = "http://json-schema.org/draft-07/schema#"
		for _, g := range gvks {
			if err := write(out, g, schema, name, written); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

func gvksOf(def map[string]any) ([]gvk, error) {
	v, ok := def["x-kubernetes-group-version-kind"]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var gvks []gvk
	return gvks, json.Unmarshal(b, &gvks)
}

const refPrefix = "#/definitions/"

// collect adds to deps every definition that node references, transitively.
func collect(node any, all map[string]map[string]any, deps map[string]any) error {
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, refPrefix)
			if !found {
				return fmt.Errorf("unsupported $ref %q", ref)
			}
			if _, seen := deps[name]; !seen {
				def, ok := all[name]
				if !ok {
					return fmt.Errorf("$ref to missing definition %q", name)
				}
				deps[name] = def
				if err := collect(def, all, deps); err != nil {
					return err
				}
			}
		}
		for _, v := range n {
			if err := collect(v, all, deps); err != nil {
				return err
			}
		}
	case []any:
		for _, v := range n {
			if err := collect(v, all, deps); err != nil {
				return err
			}
		}
	}
	return nil
}

// strict returns a copy of a schema node made strict (see the package doc).
// inProps is true when node is a "properties" map (its keys are field names,
// not schema keywords).
func strict(node any, inProps bool) any {
	switch n := node.(type) {
	case map[string]any:
		if inProps {
			out := make(map[string]any, len(n))
			for k, v := range n {
				out[k] = strict(v, false)
			}
			return out
		}
		switch {
		case n["format"] == "int-or-string" || n["x-kubernetes-int-or-string"] == true:
			return withDescription(n, map[string]any{"oneOf": []any{
				map[string]any{"type": "string"}, map[string]any{"type": "integer"}, map[string]any{"type": "null"},
			}})
		case isQuantity(n):
			return withDescription(n, map[string]any{"oneOf": []any{
				map[string]any{"type": "string"}, map[string]any{"type": "number"}, map[string]any{"type": "null"},
			}})
		}
		out := map[string]any{}
		for k, v := range n {
			switch {
			case strings.HasPrefix(k, "x-kubernetes-"):
				// Extensions are no JSON Schema keywords; the ones that matter
				// were handled above or below.
			case k == "properties" || k == "patternProperties" || k == "definitions":
				out[k] = strict(v, true)
			case k == "format":
				// Only keep formats the validator checks meaningfully.
				if v == "date-time" {
					out[k] = v
				}
			case k == "nullable":
				// OpenAPI v3 keyword (CRDs): null is allowed below anyway.
			default:
				out[k] = strict(v, false)
			}
		}
		preserve := n["x-kubernetes-preserve-unknown-fields"] == true
		if _, hasProps := n["properties"]; hasProps && !preserve {
			if _, set := n["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		if t, ok := n["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = strict(v, false)
		}
		return out
	default:
		return node
	}
}

// isQuantity recognizes the Quantity definition: a string whose
// description starts like resource.Quantity's.
func isQuantity(n map[string]any) bool {
	d, _ := n["description"].(string)
	return n["type"] == "string" && strings.HasPrefix(d, "Quantity is a fixed-point representation of a number.")
}

func withDescription(from, to map[string]any) map[string]any {
	if d, ok := from["description"]; ok {
		to["description"] = d
	}
	return to
}

func write(out string, g gvk, schema map[string]any, source string, written map[string]string) error {
	name := g.fileName()
	if prev, dup := written[name]; dup && prev != source {
		return fmt.Errorf("%s: both %s and %s map to it", name, prev, source)
	}
	written[name] = source
	b, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, name), append(b, '\n'), 0o644)
}

// fromCRDs writes one schema per served version of each CRD in path.
func fromCRDs(path, out string, written map[string]string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, doc := range splitYAML(string(raw)) {
		var crd struct {
			Kind string `json:"kind"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Served bool   `json:"served"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			return n, fmt.Errorf("document %d: %w", i, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return n, fmt.Errorf("document %d: kind %q, want CustomResourceDefinition", i, crd.Kind)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if v.Schema.OpenAPIV3Schema == nil {
				return n, fmt.Errorf("%s/%s %s: no openAPIV3Schema", crd.Spec.Group, v.Name, crd.Spec.Names.Kind)
			}
			schema := strict(v.Schema.OpenAPIV3Schema, false).(map[string]any)
			schema["$schema"] = "http://json-schema.org/draft-07/schema#"
			g := gvk{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			if err := write(out, g, schema, path, written); err != nil {
				return n, err
			}
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("no served CRD version")
	}
	return n, nil
}

// splitYAML splits a multi-document YAML stream on "---" lines, dropping
// empty documents.
func splitYAML(s string) []string {
	var docs []string
	var cur []string
	flush := func() {
		d := strings.TrimSpace(strings.Join(cur, "\n"))
		if d != "" && strings.Trim(strings.ReplaceAll(d, "\n", ""), " ") != "" && !allComments(d) {
			docs = append(docs, d)
		}
		cur = cur[:0]
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimRight(line, " \t\r") == "---" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return docs
}

func allComments(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}
