package server

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apiauth"
)

// The access rules are read from the service's descriptor: each call of
// receipts.v1 carries its (receipts.v1.access) option (access.proto), its
// scope and the request fields an end-user token must own, so the proto
// is the one place a call's rule is written and a new call brings its
// rule with it. Every protocol (gRPC, gRPC-Web, Connect, the REST routes
// vanguard transcodes, the fast REST path and the server-sent events
// route) checks these before the handler runs.
var procedureScopes, endUserRules = mustAccessRules(receiptsv1.File_receipts_v1_receipts_proto.Services().ByName("ReceiptService"))

func mustAccessRules(sd protoreflect.ServiceDescriptor) (map[string]apiauth.Scope, map[string]ownRule) {
	scopes, rules, err := accessRules(sd)
	if err != nil {
		panic(err)
	}
	return scopes, rules
}

// accessRules reads the rule of every method of sd: its scope, and, when
// it names fields an end-user token must own, its ownRule. A method
// without a rule, with an unknown scope or with a path the request does
// not have is an error (the proto is wrong, so the binary must not start).
func accessRules(sd protoreflect.ServiceDescriptor) (map[string]apiauth.Scope, map[string]ownRule, error) {
	scopes := map[string]apiauth.Scope{}
	rules := map[string]ownRule{}
	methods := sd.Methods()
	for i := range methods.Len() {
		md := methods.Get(i)
		proc := "/" + string(sd.FullName()) + "/" + string(md.Name())
		a, ok := proto.GetExtension(md.Options(), receiptsv1.E_Access).(*receiptsv1.Access)
		if !ok || a == nil || a.GetScope() == "" {
			return nil, nil, fmt.Errorf("%s has no (receipts.v1.access) scope", md.FullName())
		}
		scope, err := apiauth.ParseScopes(a.GetScope())
		if err != nil || strings.Contains(a.GetScope(), ",") {
			return nil, nil, fmt.Errorf("%s: scope %q is not one scope", md.FullName(), a.GetScope())
		}
		scopes[proc] = scope
		users, err := fieldPaths(md.Input(), a.GetOwnUsers())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: own_users: %w", md.FullName(), err)
		}
		channels, err := fieldPaths(md.Input(), a.GetOwnChannels())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: own_channels: %w", md.FullName(), err)
		}
		if len(users) == 0 && len(channels) == 0 {
			continue
		}
		var r ownRule
		if len(users) > 0 {
			r.users = func(m proto.Message) []idField { return idsAt(m, users) }
		}
		if len(channels) > 0 {
			r.channels = func(m proto.Message) []idField { return idsAt(m, channels) }
		}
		rules[proc] = r
	}
	return scopes, rules, nil
}

// fieldPath is a resolved path to string ids in a request: each step a
// field, list when it is repeated (every element is visited).
type fieldPath []pathStep

type pathStep struct {
	fd   protoreflect.FieldDescriptor
	list bool
}

// fieldPaths resolves paths ("receipts[].user_id") against md. The last
// step must be a string field, every other one a message field; "[]"
// must follow exactly the repeated ones.
func fieldPaths(md protoreflect.MessageDescriptor, paths []string) ([]fieldPath, error) {
	var out []fieldPath
	for _, p := range paths {
		var fp fieldPath
		cur := md
		steps := strings.Split(p, ".")
		for i, s := range steps {
			name, list := strings.CutSuffix(s, "[]")
			if cur == nil {
				return nil, fmt.Errorf("%q: %s is not a message", p, steps[i-1])
			}
			fd := cur.Fields().ByName(protoreflect.Name(name))
			if fd == nil {
				return nil, fmt.Errorf("%q: %s has no field %s", p, cur.FullName(), name)
			}
			if list != fd.IsList() {
				return nil, fmt.Errorf("%q: %s must be followed by [] exactly when it is repeated", p, name)
			}
			last := i == len(steps)-1
			switch {
			case last && fd.Kind() != protoreflect.StringKind:
				return nil, fmt.Errorf("%q: %s is not a string", p, name)
			case !last && fd.Kind() != protoreflect.MessageKind:
				return nil, fmt.Errorf("%q: %s is not a message", p, name)
			}
			fp = append(fp, pathStep{fd: fd, list: list})
			cur = fd.Message()
		}
		out = append(out, fp)
	}
	return out, nil
}

// idsAt returns the ids at paths in m, each named as the request names it
// ("receipts[3].user_id").
func idsAt(m proto.Message, paths []fieldPath) []idField {
	var out []idField
	for _, p := range paths {
		out = collectIDs(m.ProtoReflect(), p, "", out)
	}
	return out
}

func collectIDs(m protoreflect.Message, p fieldPath, prefix string, out []idField) []idField {
	step, name := p[0], prefix+string(p[0].fd.Name())
	last := len(p) == 1
	visit := func(v protoreflect.Value, name string) {
		if last {
			out = append(out, idField{name, v.String()})
		} else {
			out = collectIDs(v.Message(), p[1:], name+".", out)
		}
	}
	if !step.list {
		visit(m.Get(step.fd), name)
		return out
	}
	l := m.Get(step.fd).List()
	for i := range l.Len() {
		visit(l.Get(i), name+"["+strconv.Itoa(i)+"]")
	}
	return out
}
