package apidoc

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// requestExamples sets an example of each JSON request body, made of the
// bundle's defaults so that it stays within the bounds bind set (Build
// validates every example against its schema).
func requestExamples(d *openapi3.T, f Facts) error {
	st := f.Settings
	examples := map[[2]string]any{}
	set := func(method, path string, v any) { examples[[2]string{method, path}] = v }

	create := map[string]any{
		"image": st.Images.Default, "ttl_seconds": st.Lifetime.DefaultTTLSeconds,
		"cpu_mhz": st.Sandbox.DefaultCPUMHz, "memory_mb": st.Sandbox.DefaultMemoryMB,
		"labels": map[string]any{"task": "demo"},
	}
	if f.DefaultProfile != "" {
		create["profile"] = f.DefaultProfile
	}
	if f.DefaultNetwork != "" {
		create["network"] = f.DefaultNetwork
	}
	set("POST", "/v1/sandboxes", create)

	exec := map[string]any{"argv": []any{"sh", "-c", "echo hi"}, "timeout_seconds": st.Exec.DefaultTimeoutSeconds}
	if len(st.Exec.WorkdirRoots) > 0 {
		exec["workdir"] = st.Exec.WorkdirRoots[0]
	}
	if st.Exec.MaxEnv > 0 && st.Exec.EnvNamePattern != "" {
		if re, err := regexp.Compile(st.Exec.EnvNamePattern); err == nil && re.MatchString("GREETING") {
			exec["env"] = map[string]any{"GREETING": "hello"}
		}
	}
	set("POST", "/v1/sandboxes/{id}/exec", exec)

	set("POST", "/v1/sandboxes/{id}/extend", map[string]any{"ttl_seconds": st.Lifetime.DefaultTTLSeconds})

	mint := map[string]any{"ttl_seconds": clamp(86400, st.Tokens.MinTTLSeconds, st.Tokens.MaxTTLSeconds), "label": "nightly ci"}
	switch {
	case slices.Contains(st.Tokens.MintableRoles, "agent"):
		mint["role"], mint["subject"] = "agent", "ci"
		if st.AgentQuota.DefaultMaxLiveSandboxes >= 1 {
			mint["quota"] = map[string]any{"max_live_sandboxes": st.AgentQuota.DefaultMaxLiveSandboxes}
		}
	case len(st.Tokens.MintableRoles) > 0:
		mint["role"] = st.Tokens.MintableRoles[0]
	}
	set("POST", "/v1/tokens", mint)

	nb := st.NodeBudgetDefault
	set("PUT", "/v1/hosts/{node}/enrollment", map[string]any{"egress": false, "budget": map[string]any{
		"max_sandboxes": clamp(int(nb.MaxSandboxes), 1, st.Hosts.MaxSandboxesCeiling),
		"cpu_mhz":       max(int(nb.CPUMHz), 1), "memory_mb": max(int(nb.MemoryMB), 1),
	}})
	if len(st.Hosts.States) > 0 {
		state := st.Hosts.States[0]
		if slices.Contains(st.Hosts.States, "frozen") {
			state = "frozen"
		}
		set("POST", "/v1/hosts/{node}/state", map[string]any{"state": state})
	}
	set("POST", "/v1/policy/evaluate", map[string]any{"entrypoint": "authz", "request": map[string]any{
		"method": "POST", "path": "/v1/sandboxes", "token_claims": map[string]any{"role": "agent", "sub": "ci"},
		"body": create,
	}})

	for k, v := range examples {
		item := d.Paths.Value(k[1])
		var op *openapi3.Operation
		if item != nil {
			op = item.GetOperation(k[0])
		}
		if op == nil || op.RequestBody == nil || op.RequestBody.Value == nil || op.RequestBody.Value.GetMediaType("application/json") == nil {
			return fmt.Errorf("apidoc: openapi.yaml lacks the JSON request body of %s %s", k[0], k[1])
		}
		// As a client would send it: JSON numbers, objects and arrays.
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("apidoc: example of %s %s: %w", k[0], k[1], err)
		}
		var ex any
		if err := json.Unmarshal(raw, &ex); err != nil {
			return fmt.Errorf("apidoc: example of %s %s: %w", k[0], k[1], err)
		}
		op.RequestBody.Value.GetMediaType("application/json").Example = ex
	}
	return nil
}

// clamp is n held to [lo, hi]; hi below lo (a bundle without the bound)
// leaves n above lo.
func clamp(n, lo, hi int) int {
	if hi >= lo && n > hi {
		n = hi
	}
	return max(n, lo)
}
