package apidoc

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"sandgate/gateway/wire"
)

// Problem codes every route that takes a token can answer, besides its own.
var tokenProblems = []string{"unauthenticated", "token_expired", "policy_denied", "header_too_large", "unavailable", "internal_error"}

// ProblemStatus is the HTTP status the document gives a problem code
// (wire.Status, docs/api.md's table); 0 for a code it does not know.
func ProblemStatus(code string) int { return wire.Status(code) }

// describe completes every operation's description from the bundle: who
// may call it (the route table), the rules that can refuse it with their
// titles, and its errors; it sets the same as x-sandgate-* extensions and
// adds a problem response per status. /mcp gets the tools.
func describe(d *openapi3.T, f Facts) {
	titles := map[string][]string{} // "entrypoint:id" -> titles
	for _, r := range f.Rules {
		k := string(r.Entrypoint) + ":" + r.ID
		if !slices.Contains(titles[k], r.Title) {
			titles[k] = append(titles[k], r.Title)
		}
	}
	for _, path := range d.Paths.InMatchingOrder() {
		item := d.Paths.Value(path)
		for method, op := range item.Operations() {
			describeOperation(d, f, titles, path, method, op)
		}
	}
	if op := d.Paths.Value("/mcp").GetOperation(http.MethodPost); op != nil {
		describeTools(f, op)
	}
}

// EchoPath is the gateway's route template of a document path.
func EchoPath(docPath string) string {
	parts := strings.Split(docPath, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") {
			parts[i] = ":" + strings.Trim(p, "{}")
		}
	}
	if p := strings.Join(parts, "/"); p != "/ui/:file" {
		return p
	}
	return "/ui/*"
}

func describeOperation(d *openapi3.T, f Facts, titles map[string][]string, path, method string, op *openapi3.Operation) {
	if op.Extensions == nil {
		op.Extensions = map[string]any{}
	}
	var sb strings.Builder
	sb.WriteString(strings.TrimSpace(op.Description))
	public := op.Security != nil && len(*op.Security) == 0
	route, routed := f.Settings.Routes[method][EchoPath(path)]
	var common, problems []string // common: the rules every request with a token passes
	switch {
	case public:
		sb.WriteString("\n\nWho may call it: anyone; no token.")
	case !routed:
		sb.WriteString("\n\nWho may call it: any valid token (Authorization: Bearer).")
	default:
		fmt.Fprintf(&sb, "\n\nWho may call it: a token of role %s (scope %s; capability %s, refused with C1 while the bundle does not advertise it), from the bundle's route table (T2).",
			orList(route.Roles), route.Scope, route.Capability)
		if route.Target == "sandbox" {
			sb.WriteString(" A session token acts on its own sandbox only (T1), an agent on the sandboxes it created only (T2).")
		}
		op.Extensions["x-sandgate-roles"] = route.Roles
		op.Extensions["x-sandgate-scope"] = route.Scope
		op.Extensions["x-sandgate-capability"] = route.Capability
		common = []string{"authz:INPUT", "authz:C1", "authz:T2", "authz:T3", "authz:T4"}
		if route.Target == "sandbox" {
			common = append(common, "authz:T1", "authz:H9")
		}
	}
	if !public && strings.HasPrefix(path, "/v1/") {
		problems = slices.Clone(tokenProblems)
	}
	own := stringsOf(op.Extensions["x-sandgate-rules"])
	problems = appendNew(problems, stringsOf(op.Extensions["x-sandgate-problems"])...)

	var known []string
	for _, k := range appendNew(slices.Clone(common), own...) {
		if len(titles[k]) > 0 { // a rule this bundle lacks cannot refuse it
			known = append(known, k)
		}
	}
	if len(known) > 0 {
		fmt.Fprintf(&sb, "\n\nRules that can refuse it (bundle %s; GET /v1/policy has their descriptions and modes):", f.Revision)
		if len(common) > 0 {
			fmt.Fprintf(&sb, "\n- every request with a token: %s (the token, its route and its sandbox)", ruleList(common, titles))
		}
		for _, k := range own {
			if len(titles[k]) > 0 {
				ep, id, _ := strings.Cut(k, ":")
				fmt.Fprintf(&sb, "\n- %s (%s): %s", id, ep, strings.Join(titles[k], "; "))
			}
		}
		op.Extensions["x-sandgate-rules"] = known
	} else {
		delete(op.Extensions, "x-sandgate-rules")
	}
	if len(problems) > 0 {
		sb.WriteString("\n\nErrors (application/problem+json; branch on code):")
		byStatus := map[int][]string{}
		for _, code := range problems {
			st := wire.Status(code)
			byStatus[st] = append(byStatus[st], code)
			fmt.Fprintf(&sb, "\n- %d %s: %s", st, code, f.ProblemTitles[code])
		}
		op.Extensions["x-sandgate-problems"] = problems
		for _, st := range slices.Sorted(maps.Keys(byStatus)) {
			key := strconv.Itoa(st)
			if op.Responses.Value(key) != nil || st == 0 {
				continue
			}
			desc := strings.Join(byStatus[st], ", ")
			op.Responses.Set(key, &openapi3.ResponseRef{Value: &openapi3.Response{
				Description: &desc,
				Content:     d.Components.Responses["Problem"].Value.Content,
			}})
		}
	}
	op.Description = sb.String()
}

// describeTools lists the MCP tools the endpoint registers, each with its
// REST route and the roles the bundle's route table lets call that route.
func describeTools(f Facts, op *openapi3.Operation) {
	var sb strings.Builder
	sb.WriteString(strings.TrimSpace(op.Description))
	sb.WriteString("\n\nTools (tools/list; each call is one request to its REST route, so who may call a tool is who may call the route, per the bundle's route table):")
	byRole := map[string][]string{}
	var list []map[string]any
	for _, t := range f.Tools {
		roles := f.Settings.Routes[t.Method][t.Route].Roles
		for _, r := range roles {
			byRole[r] = append(byRole[r], t.Name)
		}
		fmt.Fprintf(&sb, "\n- %s: %s %s; roles %s. %s", t.Name, t.Method, t.Route, orList(roles), t.Description)
		entry := map[string]any{"name": t.Name, "description": t.Description, "method": t.Method, "route": t.Route, "roles": roles}
		if len(t.InputSchema) > 0 {
			entry["input_schema"] = t.InputSchema
		}
		list = append(list, entry)
	}
	sb.WriteString("\n\nBy role:")
	for _, role := range slices.Sorted(maps.Keys(f.Settings.Roles)) {
		fmt.Fprintf(&sb, "\n- %s: %s", role, orNone(byRole[role]))
	}
	op.Description = sb.String()
	if op.Extensions == nil {
		op.Extensions = map[string]any{}
	}
	op.Extensions["x-sandgate-tools"] = list
}

// ruleList is "INPUT, C1 and T2" of the keys this bundle has.
func ruleList(keys []string, titles map[string][]string) string {
	var ids []string
	for _, k := range keys {
		if len(titles[k]) > 0 {
			_, id, _ := strings.Cut(k, ":")
			ids = append(ids, id)
		}
	}
	if len(ids) < 2 {
		return strings.Join(ids, "")
	}
	return strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}

func stringsOf(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, s := range v {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = v
	}
	return out
}

func appendNew(list []string, more ...string) []string {
	for _, s := range more {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

func orList(words []string) string {
	switch len(words) {
	case 0:
		return "none"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func orNone(words []string) string {
	if len(words) == 0 {
		return "none"
	}
	return strings.Join(words, ", ")
}
