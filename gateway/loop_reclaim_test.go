package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/store"
)

func TestUsageMonitorMakesNoNomadCallWhileNoSandboxIsLive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.sim.ResetRequests()
	n, err := h.srv.Reclaim(t.Context())
	if err != nil || n != 0 {
		t.Fatalf("Reclaim = %d, %v", n, err)
	}
	if got := h.sim.Requests(); got != 0 {
		t.Fatalf("an idle monitor pass made %d Nomad requests: %v", got, h.sim.RequestLog())
	}
}

func TestUsageMonitorReclaimsANodeCrossingTheDiskOrMemoryThreshold(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		mem, disk float64
		reclaim   bool
	}{
		{"below both thresholds", 95.9, 91.9, false},
		{"disk at 92 %", 40, 92, true},
		{"memory at 96.2 %", 96.2, 40, true}, // the simulator reports via bytes: 96 reads back as 95.99...
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			a := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
			b := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
			other := h.gw.Create(h.operator, map[string]any{"node": "worker-2"}).ID
			if err := h.sim.SetNodeUsage("worker-1", c.mem, c.disk); err != nil {
				t.Fatal(err)
			}
			n, err := h.srv.Reclaim(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{true: 2, false: 0}[c.reclaim]
			if n != want {
				t.Fatalf("reclaimed %d, want %d", n, want)
			}
			for _, id := range []string{a, b} {
				rec, _ := h.st.Get(t.Context(), id)
				if got := rec.State == store.StateEnded && rec.EndReason == "reclaimed"; got != c.reclaim {
					t.Fatalf("%s: %s/%s, reclaim %v", id, rec.State, rec.EndReason, c.reclaim)
				}
			}
			if rec, _ := h.st.Get(t.Context(), other); rec.State != store.StateRunning {
				t.Fatalf("a sandbox on a healthy node was touched: %s", rec.State)
			}
			if u, _ := h.st.NodeUsage(t.Context(), "worker-1"); c.reclaim && u.Sandboxes != 0 {
				t.Fatalf("budget still held after reclaim: %+v", u)
			}
			if c.reclaim {
				log, err := os.ReadFile(filepath.Join(h.dataDir, "decisions.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(log), `"entrypoint":"reclaim"`) || !strings.Contains(string(log), `"R3"`) {
					t.Fatalf("the reclaim decision is not in the decision log")
				}
			}
		})
	}
}

func TestUsageMonitorReclaimsANodeNomadDrains(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	id := h.gw.Create(h.operator, map[string]any{"node": "worker-2"}).ID
	if n, err := h.srv.Reclaim(t.Context()); n != 0 || err != nil {
		t.Fatalf("before the drain: %d, %v", n, err)
	}
	if err := h.sim.SetNodeDrain("worker-2", true); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(3 * time.Second) // past the node cache's 2 s
	n, err := h.srv.Reclaim(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("Reclaim after the drain = %d, %v", n, err)
	}
	if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateEnded || rec.EndReason != "reclaimed" {
		t.Fatalf("after the drain: %+v", rec)
	}
	r := h.gw.Do(http.MethodGet, "/v1/decisions?limit=500", h.operator, nil)
	found := false
	for _, x := range r.JSON(t)["decisions"].([]any) {
		d := x.(map[string]any)
		if d["entrypoint"] == "reclaim" && d["allow"] == false {
			ids := d["rule_ids"].([]any)
			found = len(ids) == 1 && ids[0] == "R2"
		}
	}
	if !found {
		t.Fatalf("no reclaim decision with R2 in /v1/decisions: %s", r.Body)
	}
}

func TestUsageMonitorReclaimsNothingWhenThePolicyCannotDecide(t *testing.T) {
	t.Parallel()
	const decision = `decision := {"allow": count(violations) == 0, "violations": violations}`
	dir := copyBundle(t, func(path string, data []byte) ([]byte, error) {
		if path != "reclaim/reclaim.rego" {
			return data, nil
		}
		if !strings.Contains(string(data), decision) {
			t.Fatal("reclaim.rego no longer holds the decision this test rewrites")
		}
		// A malformed decision (no violations): the engine refuses it.
		return []byte(strings.Replace(string(data), decision, `decision := {"allow": false}`, 1)), nil
	})
	h := newHarness(t, harnessOptions{policyDir: dir})
	id := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	if err := h.sim.SetNodeUsage("worker-1", 99, 99); err != nil {
		t.Fatal(err)
	}
	n, err := h.srv.Reclaim(t.Context())
	if err == nil || n != 0 {
		t.Fatalf("Reclaim = %d, %v; want 0 and the engine's error", n, err)
	}
	if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateRunning {
		t.Fatalf("a sandbox was reclaimed without a decision: %s", rec.State)
	}
}
