package gateway

import (
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"sandgate/policies"
)

// The bodies of the routes that take one, through the whole pipeline
// (pipeline_fuzz_test.go): whatever reaches the handler is within the
// bounds docs/api.md and the bundle's data state, and every refusal is a
// 400 naming a field, a 403 naming the rules that judge that body, or a
// 413. The decoders alone are fuzzed by requests_fuzz_test.go; here the
// decoder, the policy and the gateway's own checks are judged together.

// Token and lifetime bounds of the bundle's data (tokens.*, agent_quota.*,
// lifetime.*) that Settings does not carry; docs/api.md states them too.
const (
	fuzzMinTokenTTL = 60
	fuzzMaxTokenTTL = 31536000
	fuzzMaxQuota    = 100
	fuzzMaxLabel    = 128
)

// fuzzSubjectPattern is the bundle's tokens.subject_pattern (T4).
var fuzzSubjectPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// fuzzBody runs data as the body of method+path through the pipeline with
// the token placeholder tok and returns the answer; refusals are checked
// against rules. It skips what net/http itself would refuse.
func (p *pipeline) fuzzBody(t *testing.T, method, path, tok string, data []byte, rules ...string) (answer, bool) {
	t.Helper()
	a, ok := p.serve(method, path, "Bearer "+tok, data)
	if !ok {
		t.Skip("not a request net/http would pass on")
	}
	if a.status == http.StatusOK {
		if !a.got.reached {
			t.Fatalf("200 without reaching the handler: %s", a.body)
		}
		return a, true
	}
	if a.got.reached {
		t.Fatalf("the handler ran, then %d: %s", a.status, a.body)
	}
	checkProblem(t, a, http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge)
	if a.status == http.StatusForbidden {
		ruleIDsWithin(t, a, rules...)
	}
	return a, false
}

func FuzzAuthorizeCreate(f *testing.F) {
	p := newPipeline(f)
	p.capture(f, http.MethodPost, "/v1/sandboxes")
	sb := p.settings.Sandbox
	f.Fuzz(func(t *testing.T, data []byte) {
		a, allowed := p.fuzzBody(t, http.MethodPost, "/v1/sandboxes", "{agent}", data, "B2", "H11", "INPUT", "L2")
		if !allowed {
			return
		}
		b, _ := a.got.body.(*createRequest)
		if b == nil {
			t.Fatalf("a create reached its handler without its body: %q", data)
		}
		if _, ok := p.settings.Profiles[deref(b.Profile, "strict")]; !ok {
			t.Fatalf("profile %q let through (INPUT)", *b.Profile)
		}
		if _, ok := p.settings.Networks[deref(b.Network, "none")]; !ok {
			t.Fatalf("network %q let through (INPUT)", *b.Network)
		}
		if b.Node != nil && *b.Node == "" {
			t.Fatalf("an empty node let through (INPUT)")
		}
		if cpu := deref(b.CPUMHz, int64(sb.DefaultCPUMHz)); cpu < int64(sb.MinCPUMHz) || cpu > int64(sb.MaxCPUMHz) {
			t.Fatalf("cpu_mhz %d let through (B2: [%d, %d])", cpu, sb.MinCPUMHz, sb.MaxCPUMHz)
		}
		if mem := deref(b.MemoryMB, int64(sb.DefaultMemoryMB)); mem < int64(sb.MinMemoryMB) || mem > int64(sb.MaxMemoryMB) {
			t.Fatalf("memory_mb %d let through (B2: [%d, %d])", mem, sb.MinMemoryMB, sb.MaxMemoryMB)
		}
		lt := p.settings.Lifetime
		if ttl := deref(b.TTLSeconds, int64(lt.DefaultTTLSeconds)); ttl < int64(lt.MinTTLSeconds) || ttl > int64(lt.CeilingSeconds) {
			t.Fatalf("ttl_seconds %d let through (L2)", ttl)
		}
		if img := deref(b.Image, p.settings.Images.Default); !slices.Contains(p.settings.Images.Allowed, img) {
			t.Fatalf("image %q let through (H11)", img)
		}
		if len(b.Labels) > maxLabels {
			t.Fatalf("%d labels let through", len(b.Labels))
		}
		for k, v := range b.Labels {
			if !labelKey.MatchString(k) || len(v) > maxLabelValueSize || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Fatalf("label %q=%q let through", k, v)
			}
		}
		if w := deref(b.WaitSeconds, 0); w < 0 || w > int64(p.srv.cfg.MaxWait.Seconds()) {
			t.Fatalf("wait_seconds %d let through", w)
		}
	})
}

func FuzzAuthorizeExec(f *testing.F) {
	p := newPipeline(f)
	const path = "/v1/sandboxes/:id/exec"
	p.capture(f, http.MethodPost, path)
	ex := p.settings.Exec
	f.Fuzz(func(t *testing.T, data []byte) {
		a, allowed := p.fuzzBody(t, http.MethodPost, "/v1/sandboxes/"+fuzzSandboxID+"/exec", "{session}", data, "E1", "E2")
		if !allowed {
			return
		}
		b, _ := a.got.body.(*execRequest)
		if b == nil {
			t.Fatalf("an exec reached its handler without its body: %q", data)
		}
		if n := len(b.Argv); n < 1 || n > ex.MaxArgs {
			t.Fatalf("argv of %d elements let through (E1)", n)
		}
		size := 0
		for _, arg := range b.Argv {
			size += len(arg)
			if strings.ContainsRune(arg, 0) {
				t.Fatalf("argv with a NUL byte let through: %q", b.Argv)
			}
		}
		for k, v := range b.Env {
			size += len(k) + 1 + len(v)
		}
		if b.Workdir != nil {
			size += len(*b.Workdir)
		}
		if size > ex.MaxVectorBytes {
			t.Fatalf("an exec vector (argv, env, workdir) of %d bytes let through (E1: %d)", size, ex.MaxVectorBytes)
		}
		if a0 := b.Argv[0]; a0 == "" || strings.HasPrefix(a0, "-") || strings.Contains(a0, "=") {
			t.Fatalf("argv[0] %q let through", a0)
		}
		if b.Stdin != nil && len(*b.Stdin) > ex.MaxStdinBytes {
			t.Fatalf("stdin of %d bytes let through (E1)", len(*b.Stdin))
		}
		if to := deref(b.TimeoutSeconds, int64(ex.DefaultTimeoutSeconds)); to < 1 || to > int64(ex.MaxTimeoutSeconds) {
			t.Fatalf("timeout_seconds %d let through (E2)", to)
		}
		if len(b.Env) > ex.MaxEnv {
			t.Fatalf("%d env entries let through (E2)", len(b.Env))
		}
		names := regexp.MustCompile(ex.EnvNamePattern)
		for k, v := range b.Env {
			if !names.MatchString(k) || strings.ContainsRune(v, 0) {
				t.Fatalf("env %q=%q let through (E1)", k, v)
			}
			for _, p := range ex.ReservedEnvPrefixes {
				if strings.HasPrefix(k, p) {
					t.Fatalf("reserved env name %q let through (E1)", k)
				}
			}
		}
		if w := b.Workdir; w != nil && !fuzzWorkdirAllowed(*w, ex) {
			t.Fatalf("workdir %q let through (E1: a normalised absolute path of at most %d bytes, at or under one of %q)", *w, ex.MaxWorkdirBytes, ex.WorkdirRoots)
		}
		if n := b.MaxOutputBytes; n != nil && (*n < 1 || *n > int64(ex.MaxOutputBytes)) {
			t.Fatalf("max_output_bytes %d let through (E2)", *n)
		}
	})
}

// fuzzWorkdirAllowed is what E1 lets through as an exec's workdir, written
// independently of the Rego: a path path.Clean leaves as it is (no empty,
// "." or ".." segment, no trailing slash but "/"), absolute, without NUL,
// of at most exec.max_workdir_bytes, equal to one of exec.workdir_roots or
// below one on a segment boundary.
func fuzzWorkdirAllowed(w string, ex policies.ExecSettings) bool {
	if !strings.HasPrefix(w, "/") || path.Clean(w) != w || strings.ContainsRune(w, 0) || len(w) > ex.MaxWorkdirBytes {
		return false
	}
	for _, root := range ex.WorkdirRoots {
		if w == root || strings.HasPrefix(w, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

func FuzzAuthorizeMint(f *testing.F) {
	p := newPipeline(f)
	p.capture(f, http.MethodPost, "/v1/tokens")
	f.Fuzz(func(t *testing.T, data []byte) {
		a, allowed := p.fuzzBody(t, http.MethodPost, "/v1/tokens", "{op}", data, "T4", "B3")
		if !allowed {
			return
		}
		b, _ := a.got.body.(*mintRequest)
		if b == nil || b.Role == nil || b.TTLSeconds == nil {
			t.Fatalf("a mint without role or ttl_seconds let through: %q", data)
		}
		if *b.Role != "operator" && *b.Role != "agent" {
			t.Fatalf("role %q let through (T4)", *b.Role)
		}
		if ttl := *b.TTLSeconds; ttl < fuzzMinTokenTTL || ttl > fuzzMaxTokenTTL {
			t.Fatalf("ttl_seconds %d let through (T4)", ttl)
		}
		if b.Label != nil && len(*b.Label) > fuzzMaxLabel {
			t.Fatalf("a label of %d bytes let through (T4)", len(*b.Label))
		}
		if q := b.Quota; q != nil {
			if *b.Role != "agent" || q.MaxLiveSandboxes == nil || *q.MaxLiveSandboxes < 1 || *q.MaxLiveSandboxes > fuzzMaxQuota {
				t.Fatalf("quota %+v for role %s let through (B3)", q, *b.Role)
			}
		}
		if b.Subject != nil && !fuzzSubjectPattern.MatchString(*b.Subject) {
			t.Fatalf("subject %q let through", *b.Subject)
		}
	})
}

func FuzzAuthorizeExtend(f *testing.F) {
	p := newPipeline(f)
	p.capture(f, http.MethodPost, "/v1/sandboxes/:id/extend")
	lt := p.settings.Lifetime
	f.Fuzz(func(t *testing.T, data []byte) {
		a, allowed := p.fuzzBody(t, http.MethodPost, "/v1/sandboxes/"+fuzzSandboxID+"/extend", "{op}", data, "L2")
		if !allowed {
			return
		}
		b, _ := a.got.body.(*extendRequest)
		if b == nil || b.TTLSeconds == nil {
			t.Fatalf("an extend without ttl_seconds let through: %q", data)
		}
		if ttl := *b.TTLSeconds; ttl < int64(lt.MinTTLSeconds) || ttl > int64(lt.CeilingSeconds) {
			t.Fatalf("ttl_seconds %d let through (L2)", ttl)
		}
	})
}
