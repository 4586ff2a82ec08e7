package gatewaytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sandgate/policies"
	"sandgate/policies/policytest"
)

// GenerousRateLimits are rate limits (rule Q1) no load test or benchmark
// reaches: they measure throughput and budgets, not fair use, which the
// gateway's own tests hold with tight numbers.
func GenerousRateLimits() map[string]policies.RateLimit {
	limits := map[string]policies.RateLimit{}
	for _, k := range []string{"operator", "reviewer", "agent", "session", policies.RateLimitAnonymous} {
		limits[k] = policies.RateLimit{RequestsPerSecond: 1e6, Burst: 1e6}
	}
	return limits
}

// BundleWithRateLimits writes the embedded bundle with limits as its
// policy data's rate_limits, and its Rego tests replaced by one small test
// per entrypoint (policytest.CopyWithSmallTests, so a reload to it is
// quick), and returns its directory.
func BundleWithRateLimits(t testing.TB, limits map[string]policies.RateLimit) string {
	t.Helper()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	file := filepath.Join(dir, "data.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	sg, _ := doc["sandgate"].(map[string]any)
	cfg, _ := sg["config"].(map[string]any)
	if cfg == nil {
		t.Fatal("gatewaytest: the embedded bundle's data has no sandgate.config")
	}
	cfg["rate_limits"] = limits
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
