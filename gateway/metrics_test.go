package gateway_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// documentedMetrics are the metric names docs/ and the README name.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range []string{"../docs/api.md", "../docs/runbook.md", "../docs/policies.md", "../docs/threat-model.md", "../docs/benchmarks.md", "../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, n := range regexp.MustCompile(`\bsandgate_[a-z_]+[a-z]\b`).FindAllString(string(b), -1) {
			if n != "sandgate_testhooks" && !slices.Contains(names, n) { // a build tag, not a metric
				names = append(names, n)
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("docs name only %v", names)
	}
	return names
}

// Every metric the docs name is on a fresh gateway's /metrics (issue 21:
// counters that had not fired were missing until they did): its series
// with known label values start at 0. The request histogram has no known
// status: its series appear with the first answer, the first scrape.
func TestEveryDocumentedMetricIsOnAFreshGateway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	families := func() map[string]bool {
		r := h.gw.Do(http.MethodGet, "/metrics", "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("/metrics: %d", r.Status)
		}
		have := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(string(r.Body), -1) {
			have[m[1]] = true
		}
		return have
	}
	first, second := families(), families()
	for _, name := range documentedMetrics(t) {
		have := first[name]
		if name == "sandgate_http_request_duration_seconds" {
			have = second[name]
		}
		if !have {
			t.Errorf("%s is named in docs/ but not on a fresh gateway's /metrics", name)
		}
	}
	body := string(h.gw.Do(http.MethodGet, "/metrics", "", nil).Body)
	for _, zero := range []string{
		`sandgate_sandboxes_ended_total{reason="destroyed"} 0`,
		`sandgate_reconcile_actions_total{action="orphan_job_purged"} 0`,
		`sandgate_policy_reloads_total{cause="signal",result="refused"} 0`,
		`sandgate_policy_decisions_total{entrypoint="isolation",result="error"} 0`,
		`sandgate_policy_violations_total{entrypoint="authz",mode="deny",result="deny",rule="T4"} 0`,
		`sandgate_nomad_errors_total{op="exec"} 0`,
	} {
		if !strings.Contains(body, zero) {
			t.Errorf("/metrics lacks %s", zero)
		}
	}
}
