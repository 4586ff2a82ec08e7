package gateway_test

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
)

// hostOf finds a host by name in a GET /v1/hosts answer.
func hostOf(t *testing.T, h *harness, name string) map[string]any {
	t.Helper()
	r := h.gw.Do(http.MethodGet, "/v1/hosts", h.operator, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list hosts: %d %s", r.Status, r.Body)
	}
	for _, x := range r.JSON(t)["hosts"].([]any) {
		if m := x.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no host %s in %s", name, r.Body)
	return nil
}

func TestHostsListEveryNodeWithEnrollmentStateUsageAndBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	if err := h.sim.SetNodeUsage("worker-1", 41.5, 63); err != nil {
		t.Fatal(err)
	}
	h.gw.Create(h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 700, "memory_mb": 256})

	r := h.gw.Do(http.MethodGet, "/v1/hosts", h.operator, nil)
	hosts := r.JSON(t)["hosts"].([]any)
	var names []string
	for _, x := range hosts {
		names = append(names, x.(map[string]any)["name"].(string))
	}
	if len(names) != 3 || names[0] != "control-1" || names[1] != "worker-1" || names[2] != "worker-2" {
		t.Fatalf("hosts %v, want control-1, worker-1, worker-2 in order", names)
	}
	w1 := hostOf(t, h, "worker-1")
	usage := w1["usage"].(map[string]any)
	budget := w1["budget"].(map[string]any)
	used := budget["used"].(map[string]any)
	if w1["enrollment"] != "sandbox" || w1["state"] != "active" || w1["architecture"] != "arm64" ||
		w1["control_plane"] != false || w1["live_sandboxes"] != float64(1) ||
		// The simulator adds what the running sandbox holds (a few MiB).
		usage["memory_percent"].(float64) < 41.5 || usage["memory_percent"].(float64) > 41.6 || math.Abs(usage["disk_percent"].(float64)-63) > 0.01 ||
		used["cpu_mhz"] != float64(700) || used["memory_mb"] != float64(256) ||
		budget["limits"].(map[string]any)["max_sandboxes"] != float64(10) {
		t.Fatalf("worker-1: %v", w1)
	}
	nm := w1["nomad"].(map[string]any)
	if nm["status"] != "ready" || nm["eligibility"] != "eligible" || nm["drain"] != false {
		t.Fatalf("worker-1 nomad: %v", nm)
	}
	if c := hostOf(t, h, "control-1"); c["control_plane"] != true || c["enrollment"] != "none" {
		t.Fatalf("control-1: %v", c)
	}
	if w2 := hostOf(t, h, "worker-2"); w2["isolation"] != "v1" || w2["enrollment"] != "sandbox+egress" {
		t.Fatalf("worker-2: %v", w2)
	}
}

func TestHostsAreOperatorOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	agent := h.mint("agent", "agent-a")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/hosts"},
		{http.MethodPut, "/v1/hosts/worker-1/enrollment"},
		{http.MethodDelete, "/v1/hosts/worker-1/enrollment"},
		{http.MethodPost, "/v1/hosts/worker-1/state"},
	} {
		body := any(nil)
		if c.method == http.MethodPost {
			body = map[string]any{"state": "frozen"}
		}
		apitest.ExpectProblem(t, h.gw.Do(c.method, c.path, agent, body), http.StatusForbidden, "policy_denied", "T2")
	}
}

func TestEnrollingAControlPlaneIsRefusedByAnyIndicator(t *testing.T) {
	t.Parallel()
	// control-1 without its meta: only the Nomad server co-location says it
	// is a control plane, and that is enough.
	h := newHarness(t, harnessOptions{nodes: []store.Node{}, simConfig: func(c *nomadsim.Config) {
		c.Nodes[2].Meta = nil
	}})
	r := h.gw.Do(http.MethodPut, "/v1/hosts/control-1/enrollment", h.operator, map[string]any{})
	m := apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied", "P2")
	if m["decision_id"] == "" {
		t.Fatalf("no decision id: %s", r.Body)
	}
	if _, err := h.st.GetNode(t.Context(), "control-1"); err == nil {
		t.Fatal("the refused enrollment was stored")
	}
	// The meta indicator alone, on a node that runs no server.
	h2 := newHarness(t, harnessOptions{nodes: []store.Node{}, simConfig: func(c *nomadsim.Config) {
		c.Nodes[0].Meta = map[string]string{"node-role": "control-plane"}
	}})
	apitest.ExpectProblem(t, h2.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h2.operator, map[string]any{}), http.StatusForbidden, "policy_denied", "P2")
	if r := h2.gw.Do(http.MethodPut, "/v1/hosts/worker-2/enrollment", h2.operator, map[string]any{}); r.Status != http.StatusOK {
		t.Fatalf("a plain worker: %d %s", r.Status, r.Body)
	}
}

func TestEgressEnrollmentNeedsTheIsolationBundleDeclared(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{nodes: []store.Node{}})
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"egress": true}),
		http.StatusForbidden, "policy_denied", "I5")
	r := h.gw.Do(http.MethodPut, "/v1/hosts/worker-2/enrollment", h.operator, map[string]any{"egress": true})
	if r.Status != http.StatusOK || r.JSON(t)["enrollment"] != "sandbox+egress" {
		t.Fatalf("worker-2 declares v1: %d %s", r.Status, r.Body)
	}
	r = h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"egress": false})
	if r.Status != http.StatusOK || r.JSON(t)["enrollment"] != "sandbox" {
		t.Fatalf("worker-1 without egress: %d %s", r.Status, r.Body)
	}
}

func TestEnrollmentBudgetIsJudgedAndBoundsCreates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{nodes: []store.Node{}})
	for _, bad := range []map[string]any{
		{"max_sandboxes": 0},
		{"cpu_mhz": -5},
		{"cpu_mhz": 8001},    // the simulated node has 8000 MHz
		{"memory_mb": 16385}, // and 16384 MB
		{"max_sandboxes": 1001},
	} {
		r := h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"budget": bad})
		apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied", "B1")
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"budget": map[string]any{"gpus": 1}}),
		http.StatusBadRequest, "invalid_request")
	r := h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"budget": map[string]any{"max_sandboxes": 1}})
	if r.Status != http.StatusOK {
		t.Fatalf("enroll: %d %s", r.Status, r.Body)
	}
	lim := r.JSON(t)["budget"].(map[string]any)["limits"].(map[string]any)
	if lim["max_sandboxes"] != float64(1) || lim["cpu_mhz"] != float64(8000) {
		t.Fatalf("limits %v: max 1, cpu the policy default", lim)
	}
	h.gw.Create(h.operator, nil)
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1"}),
		http.StatusTooManyRequests, "budget_exhausted", "B1")
}

func TestEnrollingAnUnknownNodeIs404(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, "/v1/hosts/nope/enrollment", h.operator, map[string]any{}), http.StatusNotFound, "host_not_found")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/hosts/control-1/state", h.operator, map[string]any{"state": "frozen"}), http.StatusConflict, "host_not_enrolled")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/hosts/worker-1/state", h.operator, map[string]any{"state": "paused"}), http.StatusForbidden, "policy_denied", "INPUT")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/hosts/worker-1/state", h.operator, map[string]any{}), http.StatusBadRequest, "invalid_request")
}

func TestUnenrollWithLiveSandboxesNeedsReclaimAndThenReleasesEverything(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).IDToken()

	r := h.gw.Do(http.MethodDelete, "/v1/hosts/worker-1/enrollment", h.operator, nil)
	apitest.ExpectProblem(t, r, http.StatusConflict, "sandboxes_live", "R2")
	if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateRunning {
		t.Fatalf("a refused unenroll touched the sandbox: %s", rec.State)
	}

	r = h.gw.Do(http.MethodDelete, "/v1/hosts/worker-1/enrollment?reclaim=true", h.operator, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("unenroll with reclaim: %d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	if got := m["reclaimed"].([]any); len(got) != 1 || got[0] != id {
		t.Fatalf("reclaimed %v, want [%s]", got, id)
	}
	if m["host"].(map[string]any)["enrollment"] != "none" {
		t.Fatalf("host after unenroll: %v", m["host"])
	}
	rec, _ := h.st.Get(t.Context(), id)
	if rec.State != store.StateEnded || rec.EndReason != "reclaimed" || rec.TokenDigest != "" {
		t.Fatalf("record after reclaim: %+v", rec)
	}
	if u, _ := h.st.NodeUsage(t.Context(), "worker-1"); u != (store.Usage{}) {
		t.Fatalf("budget still held: %+v", u)
	}
	if jobs := h.sim.Jobs(); len(jobs) != 0 {
		t.Fatalf("jobs left in Nomad: %v", jobs)
	}
	if _, err := h.st.GetNode(t.Context(), "worker-1"); err == nil {
		t.Fatal("the node record is still there")
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil), http.StatusUnauthorized, "unauthenticated")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, "/v1/hosts/worker-1/enrollment", h.operator, nil), http.StatusConflict, "host_not_enrolled")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, "/v1/hosts/worker-2/enrollment?reclaim=yes", h.operator, nil), http.StatusBadRequest, "invalid_request")
}

func TestOperatorStatesFreezeReserveAndDrain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	for _, state := range []string{"frozen", "reserved"} {
		r := h.gw.Do(http.MethodPost, "/v1/hosts/worker-1/state", h.operator, map[string]any{"state": state})
		if r.Status != http.StatusOK || r.JSON(t)["host"].(map[string]any)["state"] != state {
			t.Fatalf("%s: %d %s", state, r.Status, r.Body)
		}
		apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1"}),
			http.StatusForbidden, "policy_denied", "P3")
		if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateRunning {
			t.Fatalf("%s touched the live sandbox", state)
		}
	}
	r := h.gw.Do(http.MethodPost, "/v1/hosts/worker-1/state", h.operator, map[string]any{"state": "draining"})
	if r.Status != http.StatusOK {
		t.Fatalf("drain: %d %s", r.Status, r.Body)
	}
	if got := r.JSON(t)["reclaimed"].([]any); len(got) != 1 || got[0] != id {
		t.Fatalf("drain reclaimed %v, want [%s]", got, id)
	}
	if rec, _ := h.st.Get(t.Context(), id); rec.State != store.StateEnded || rec.EndReason != "reclaimed" {
		t.Fatalf("after drain: %+v", rec)
	}
	if n, _ := h.st.GetNode(t.Context(), "worker-1"); n.State != "draining" {
		t.Fatalf("node state %q", n.State)
	}
	if r := h.gw.Do(http.MethodPost, "/v1/hosts/worker-1/state", h.operator, map[string]any{"state": "active"}); r.Status != http.StatusOK {
		t.Fatalf("thaw: %d %s", r.Status, r.Body)
	}
	h.gw.Create(h.operator, map[string]any{"node": "worker-1"})
}

// A control plane enrolled by an old record (before the hosts decision
// existed) is never picked for a create without a node; named, P2 refuses it.
func TestCreateNeverPicksAControlPlaneOnItsOwn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{nodes: []store.Node{{Name: "control-1", Enrollment: "sandbox", State: "active"}}})
	m := apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{}), http.StatusConflict, "no_enrolled_node")
	// The 409 says why (as for a single `nomad agent -dev`, whose only node
	// runs a server).
	if d, _ := m["detail"].(string); !strings.Contains(d, "control-1: runs a Nomad server, a control plane (P2)") {
		t.Fatalf("the 409 does not say why: %q", d)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "control-1"}), http.StatusForbidden, "policy_denied", "P2")
	if jobs := h.sim.Jobs(); len(jobs) != 0 {
		t.Fatalf("a job reached Nomad: %v", jobs)
	}
}
