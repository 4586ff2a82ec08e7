package apidoc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// bind sets the enums, bounds and defaults of the request fields that the
// bundle's data decides, so a client generated from the document refuses
// what the policy would (the policy still decides: the rule named in each
// description). Answers get none of them: a record made under an earlier
// bundle may hold a value the serving one no longer offers.
func bind(d *openapi3.T, f Facts) error {
	st := f.Settings
	b := binder{d: d}

	// POST /v1/sandboxes (INPUT, H11, L2, B2 of authz).
	create := func(name string) *openapi3.Schema { return b.prop("CreateRequest", name) }
	b.enum(create("profile"), slices.Sorted(maps.Keys(st.Profiles)), f.DefaultProfile)
	b.enum(create("network"), slices.Sorted(maps.Keys(st.Networks)), f.DefaultNetwork)
	b.enum(create("image"), st.Images.Allowed, st.Images.Default)
	b.bounds(create("ttl_seconds"), st.Lifetime.MinTTLSeconds, st.Lifetime.CeilingSeconds, st.Lifetime.DefaultTTLSeconds)
	b.bounds(create("cpu_mhz"), st.Sandbox.MinCPUMHz, st.Sandbox.MaxCPUMHz, st.Sandbox.DefaultCPUMHz)
	b.bounds(create("memory_mb"), st.Sandbox.MinMemoryMB, st.Sandbox.MaxMemoryMB, st.Sandbox.DefaultMemoryMB)
	b.bounds(create("wait_seconds"), 0, f.MaxWaitSeconds, f.DefaultWaitSeconds)
	if s := create("reissue_token"); s != nil {
		s.Default = false
	}

	// POST /v1/sandboxes/{id}/extend (L2).
	b.bounds(b.prop("ExtendRequest", "ttl_seconds"), st.Lifetime.MinTTLSeconds, st.Lifetime.CeilingSeconds, -1)

	// POST /v1/sandboxes/{id}/exec (E1, E2).
	exec := func(name string) *openapi3.Schema { return b.prop("ExecRequest", name) }
	if s := exec("argv"); s != nil {
		s.MinItems = 1
		s.MaxItems = uintp(st.Exec.MaxArgs)
	}
	b.bounds(exec("timeout_seconds"), 1, st.Exec.MaxTimeoutSeconds, st.Exec.DefaultTimeoutSeconds)
	b.bounds(exec("max_output_bytes"), 1, st.Exec.MaxOutputBytes, st.Exec.MaxOutputBytes)
	// A string of n bytes has at most n characters: maxLength is a bound
	// the policy's byte count can only tighten.
	b.maxLength(exec("stdin"), st.Exec.MaxStdinBytes)
	b.maxLength(exec("workdir"), st.Exec.MaxWorkdirBytes)
	if s := exec("env"); s != nil {
		s.MaxProps = uintp(st.Exec.MaxEnv)
		if st.Exec.EnvNamePattern != "" {
			s.PropertyNames = openapi3.NewSchemaRef("", &openapi3.Schema{
				Type: &openapi3.Types{openapi3.TypeString}, Pattern: st.Exec.EnvNamePattern,
				Description: "exec.env_name_pattern; a name starting with one of exec.reserved_env_prefixes (" +
					strings.Join(st.Exec.ReservedEnvPrefixes, ", ") + ") is refused too (E1)",
			})
		}
	}

	// GET /v1/sandboxes/{id}/logs (E3).
	b.bounds(b.param("/v1/sandboxes/{id}/logs", "GET", "tail_bytes"), 1, st.Exec.MaxLogsTailBytes, st.Exec.MaxLogsTailBytes)

	// /v1/sandboxes/{id}/files (F1, F2).
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		b.maxLength(b.param("/v1/sandboxes/{id}/files", m, "path"), st.Files.MaxPathBytes)
	}
	b.bounds(b.param("/v1/sandboxes/{id}/files", "GET", "length"), 1, int(st.Files.MaxReadBytes), -1)
	if s := b.param("/v1/sandboxes/{id}/files", "PUT", "mode"); s != nil {
		s.Default = fmt.Sprintf("%04o", st.Files.DefaultMode)
	}
	// The files limits every files answer states in its headers.
	for name, v := range map[string]int64{
		"MaxWriteBytes": st.Files.MaxWriteBytes, "MaxReadBytes": st.Files.MaxReadBytes,
		"MaxListEntries": int64(st.Files.MaxListEntries), "FilesTimeout": int64(st.Files.TimeoutSeconds),
	} {
		if h := b.d.Components.Headers[name]; h != nil && h.Value != nil && h.Value.Schema != nil && h.Value.Schema.Value != nil {
			h.Value.Schema.Value.Example = v
		} else {
			b.missing = append(b.missing, "header "+name)
		}
	}
	if op := b.d.Paths.Value("/v1/sandboxes/{id}/files").GetOperation("PUT"); op != nil && op.RequestBody != nil && op.RequestBody.Value != nil {
		op.RequestBody.Value.Description += fmt.Sprintf(" This bundle: files.max_write_bytes = %d.", st.Files.MaxWriteBytes)
	}
	if s := b.param("/v1/sandboxes/{id}", "GET", "id"); s != nil && st.SandboxIDPattern != "" {
		s.Pattern = st.SandboxIDPattern
	}

	// GET /v1/sandboxes: the states a listing may name.
	if s := b.param("/v1/sandboxes", "GET", "state"); s != nil {
		states := slices.Concat(st.Sandbox.States.Live, st.Sandbox.States.Terminal)
		s.Examples = []any{strings.Join(st.Sandbox.States.Live, ",")}
		s.Pattern = "^(" + alternation(states) + ")(,(" + alternation(states) + "))*$"
	}

	// Hosts (B1, R2 of the hosts decision).
	b.enum(b.prop("HostStateRequest", "state"), st.Hosts.States, "")
	budget := func(name string) *openapi3.Schema { return b.prop("EnrollRequest", "budget", name) }
	b.bounds(budget("max_sandboxes"), 1, st.Hosts.MaxSandboxesCeiling, int(st.NodeBudgetDefault.MaxSandboxes))
	b.bounds(budget("cpu_mhz"), 1, -1, int(st.NodeBudgetDefault.CPUMHz))
	b.bounds(budget("memory_mb"), 1, -1, int(st.NodeBudgetDefault.MemoryMB))
	if s := b.prop("EnrollRequest", "egress"); s != nil {
		s.Default = false
	}

	// POST /v1/tokens (T4, B3).
	b.enum(b.prop("MintRequest", "role"), st.Tokens.MintableRoles, "")
	b.bounds(b.prop("MintRequest", "ttl_seconds"), st.Tokens.MinTTLSeconds, st.Tokens.MaxTTLSeconds, -1)
	b.bounds(b.prop("MintRequest", "quota", "max_live_sandboxes"), 1, st.AgentQuota.MaxLiveSandboxes, st.AgentQuota.DefaultMaxLiveSandboxes)

	// The bundle's decisions.
	b.enum(b.prop("EvaluateRequest", "entrypoint"), f.Entrypoints, "authz")
	b.enum(b.param("/v1/decisions", "GET", "entrypoint"), f.Entrypoints, "")
	return b.err()
}

// binder finds the schemas bind sets and collects what it cannot find
// (openapi.yaml and bind disagree: a test fails on it).
type binder struct {
	d       *openapi3.T
	missing []string
}

func (b *binder) err() error {
	if len(b.missing) == 0 {
		return nil
	}
	return errors.New("apidoc: openapi.yaml lacks " + strings.Join(b.missing, ", "))
}

// prop is components.schemas[name].properties[path[0]].properties[path[1]]...
func (b *binder) prop(name string, path ...string) *openapi3.Schema {
	ref := b.d.Components.Schemas[name]
	for _, p := range path {
		if ref == nil || ref.Value == nil {
			break
		}
		ref = ref.Value.Properties[p]
	}
	if ref == nil || ref.Value == nil {
		b.missing = append(b.missing, "schema "+name+"."+strings.Join(path, "."))
		return nil
	}
	return ref.Value
}

// param is the schema of the parameter name of path's method operation,
// or of path itself.
func (b *binder) param(path, method, name string) *openapi3.Schema {
	if item := b.d.Paths.Value(path); item != nil {
		params := item.Parameters
		if op := item.GetOperation(method); op != nil {
			params = append(slices.Clone(op.Parameters), params...)
		}
		for _, p := range params {
			if p.Value != nil && p.Value.Name == name && p.Value.Schema != nil && p.Value.Schema.Value != nil {
				return p.Value.Schema.Value
			}
		}
	}
	b.missing = append(b.missing, fmt.Sprintf("parameter %s of %s %s", name, method, path))
	return nil
}

// bounds sets minimum, maximum and default; a negative value leaves one
// unset.
func (b *binder) bounds(s *openapi3.Schema, minimum, maximum, def int) {
	if s == nil {
		return
	}
	if minimum >= 0 {
		s.Min = floatp(minimum)
	}
	if maximum >= 0 {
		s.Max = floatp(maximum)
	}
	if def >= 0 {
		s.Default = def
	}
}

// enum sets the allowed values and, when it is one of them, the default.
func (b *binder) enum(s *openapi3.Schema, values []string, def string) {
	if s == nil || len(values) == 0 {
		return
	}
	s.Enum = make([]any, len(values))
	for i, v := range values {
		s.Enum[i] = v
	}
	if slices.Contains(values, def) {
		s.Default = def
	}
}

func (b *binder) maxLength(s *openapi3.Schema, n int) {
	if s != nil && n > 0 {
		s.MaxLength = uintp(n)
	}
}

func floatp(n int) *float64 { f := float64(n); return &f }

func uintp(n int) *uint64 {
	u := uint64(max(n, 0))
	return &u
}

// alternation is a regexp alternation of literal words.
func alternation(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = regexpQuote(w)
	}
	return strings.Join(q, "|")
}

// regexpQuote escapes the metacharacters of ECMA-262 and RE2 alike.
func regexpQuote(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
