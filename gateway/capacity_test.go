package gateway_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
)

// otherJob is a job of another scheduler (no sandbox prefix) pinned to
// node and holding cpu MHz and mem MB there, as a raw Nomad user would
// register it.
func otherJob(id, node string, cpu, mem int) *api.Job {
	job := api.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	job.Constrain(api.NewConstraint("${node.unique.name}", "=", node))
	task := api.NewTask("app", "docker").SetConfig("image", "app:1").SetConfig("command", "sleep").
		SetConfig("args", []string{"3600"}).Require(&api.Resources{CPU: new(cpu), MemoryMB: new(mem)})
	job.AddTaskGroup(api.NewTaskGroup("app", 1).AddTask(task))
	return job
}

// registerOther registers job straight on the simulator (outside the
// gateway) and waits until its allocation holds the room.
func registerOther(t *testing.T, h *harness, job *api.Job) {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: h.simURL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", *job.ID, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		allocs, _, err := c.Jobs().Allocations(*job.ID, false, nil)
		if err == nil && len(allocs) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s was not placed: %v %v", *job.ID, allocs, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sandboxJobs are the simulator's jobs with the sandbox prefix.
func sandboxJobs(h *harness) []string {
	return slices.DeleteFunc(h.sim.Jobs(), func(id string) bool { return !strings.HasPrefix(id, "sandgate-sbx-") })
}

// A job of another scheduler holds most of the node: a create the budget
// would allow (8,000 MHz of default budget, 500 used of it) is refused by
// the policy (B1, 429 with Retry-After) before anything reaches Nomad.
func TestACreateThatNomadCouldNotPlaceIsRefusedBeforeNomad(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	registerOther(t, h, otherJob("billing", "worker-1", 7800, 1024))
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 500})
	m := apitest.ExpectProblem(t, r, http.StatusTooManyRequests, "budget_exhausted", "B1")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("a 429 without Retry-After: %v", r.Header)
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, "7800 cpu_mhz held by other jobs") || !strings.Contains(d, "8000 Nomad can allocate") {
		t.Fatalf("detail does not name the room: %s", r.Body)
	}
	if jobs := sandboxJobs(h); len(jobs) != 0 {
		t.Fatalf("a sandbox job reached Nomad: %v", jobs)
	}
	assertBudgetMatchesLiveRecords(t, h)
	// What still fits is admitted.
	h.gw.Create(h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 200})
}

// Without a node named, a create goes to a node with room: the full one
// is passed over on B1 alone.
func TestACreateWithoutANodeGoesWhereNomadHasRoom(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	registerOther(t, h, otherJob("billing", "worker-1", 7800, 1024))
	registerOther(t, h, otherJob("search", "worker-2", 1000, 1024))
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"cpu_mhz": 500})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if m := r.JSON(t); m["node"] != "worker-2" || m["state"] != "running" {
		t.Fatalf("create: %s", r.Body)
	}
}

// Enrollment: a budget figure above what Nomad can allocate (5,192 MHz
// fingerprinted, 200 reserved, 500 held by another job) is refused with
// the room in the message; the default (8,000 MHz, 16,384 MB) is clamped
// to it and the answer says so.
func TestEnrollmentIsBoundByWhatNomadCanAllocate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{nodes: []store.Node{}, simConfig: func(c *nomadsim.Config) {
		c.Nodes[0].CPUMHz, c.Nodes[0].ReservedCPUMHz, c.Nodes[0].ReservedMemoryMB = 5192, 200, 512
	}})
	registerOther(t, h, otherJob("billing", "worker-1", 500, 256))
	r := h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"budget": map[string]any{"cpu_mhz": 4493}})
	m := apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied", "B1")
	if d, _ := m["detail"].(string); !strings.Contains(d, "budget.cpu_mhz 4493 exceeds the 4492 Nomad can allocate on node worker-1 (4992 allocatable less 500 held by other jobs)") {
		t.Fatalf("detail: %s", r.Body)
	}
	if _, err := h.st.GetNode(context.Background(), "worker-1"); err == nil {
		t.Fatal("a refused enrollment was stored")
	}
	r = h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{"budget": map[string]any{"cpu_mhz": 4492}})
	if r.Status != http.StatusOK {
		t.Fatalf("enroll at the room: %d %s", r.Status, r.Body)
	}
	r = h.gw.Do(http.MethodPut, "/v1/hosts/worker-1/enrollment", h.operator, map[string]any{})
	if r.Status != http.StatusOK {
		t.Fatalf("enroll with the default: %d %s", r.Status, r.Body)
	}
	b := r.JSON(t)["budget"].(map[string]any)
	lim := b["limits"].(map[string]any)
	// memory: 16384 - 512 reserved - 256 held by the other job
	if lim["cpu_mhz"] != 4492.0 || lim["memory_mb"] != 15616.0 || lim["max_sandboxes"] != 10.0 {
		t.Fatalf("default budget not clamped to the room: %v", b)
	}
	if cl, _ := b["clamped"].([]any); len(cl) != 2 || cl[0] != "cpu_mhz" || cl[1] != "memory_mb" {
		t.Fatalf("the answer does not say the default was clamped: %v", b)
	}
	capacity := b["capacity"].(map[string]any)
	if a := capacity["allocatable"].(map[string]any); a["cpu_mhz"] != 4992.0 || a["memory_mb"] != 16384.0-512 {
		t.Fatalf("capacity: %v", capacity)
	}
	// The clamped budget is what creates see: 9 × 500 MHz > 4,492.
	for range 8 {
		h.gw.Create(h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 500})
	}
	r = h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 500})
	apitest.ExpectProblem(t, r, http.StatusTooManyRequests, "budget_exhausted", "B1")
	assertBudgetMatchesLiveRecords(t, h)
}

// takeRoomAtRegister makes another scheduler's job take most of worker-1's
// CPU at the moment the gateway registers its next sandbox job: after
// admission, before Nomad places the sandbox.
func takeRoomAtRegister(t *testing.T, h *harness) {
	t.Helper()
	h.sim.InjectFault(nomadsim.Fault{Method: http.MethodPut, PathPrefix: "/v1/jobs", Times: 1, Before: func() {
		registerOther(t, h, otherJob("batch-import", "worker-1", 7900, 512))
	}})
}

// The room is taken after admission: the create answers 429
// placement_failed with Nomad's reason and Retry-After, never a 201; the
// record ends failed, its budget is released, its token is void and its
// job purged.
func TestARaceForTheRoomAnswersPlacementFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	takeRoomAtRegister(t, h)
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 500})
	m := apitest.ExpectProblem(t, r, http.StatusTooManyRequests, "placement_failed")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After: %v", r.Header)
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, "resources exhausted: cpu: 1") {
		t.Fatalf("detail lacks Nomad's reason: %s", r.Body)
	}
	if _, ok := m["token"]; ok {
		t.Fatalf("a token in a failed create: %s", r.Body)
	}
	id, _ := m["sandbox_id"].(string)
	rec, err := h.st.Get(context.Background(), id)
	if err != nil || rec.State != store.StateFailed || rec.EndReason != "placement_failed" || !strings.Contains(rec.LastError, "cpu") {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if jobs := sandboxJobs(h); len(jobs) != 0 {
		t.Fatalf("sandbox jobs left: %v", jobs)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

// With wait_seconds 0 the create answers 201 starting before Nomad
// decides; a failed placement then ends the record (placement_failed,
// last_error Nomad's reason), releases its budget and purges the job. The
// caller learns it from GET /v1/sandboxes/{id}.
func TestARaceForTheRoomWithoutWaitingEndsTheRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	takeRoomAtRegister(t, h)
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 500, "wait_seconds": 0})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	id := m["id"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, h.operator, nil).JSON(t)
		if g["state"] == "failed" {
			if g["end_reason"] != "placement_failed" || !strings.Contains(g["last_error"].(string), "resources exhausted") {
				t.Fatalf("failed record: %v", g)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record never failed: %v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok := m["token"].(string)
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, tok, nil); r.Status < 400 {
		t.Fatalf("the failed sandbox's token still works: %d %s", r.Status, r.Body)
	}
	for len(sandboxJobs(h)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox jobs left: %v", sandboxJobs(h))
		}
		time.Sleep(20 * time.Millisecond)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

// A burst of creates on one node lists its allocations once per
// AllocatedTTL, not once per create (the listing grows with the node's
// churn); with the cache off, every create lists them.
func TestCreatesReuseARecentAllocationsRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ttl  time.Duration
		want func(n int) bool
	}{
		{time.Hour, func(n int) bool { return n == 1 }},
		{-1, func(n int) bool { return n == 3 }},
	} {
		h := newHarness(t, harnessOptions{config: func(c *gateway.Config) { c.AllocatedTTL = tc.ttl }})
		before := nodeAllocatedCalls(t, h)
		for range 3 {
			h.gw.Create(h.operator, map[string]any{"node": "worker-1", "cpu_mhz": 100, "memory_mb": 64})
		}
		if n := nodeAllocatedCalls(t, h) - before; !tc.want(n) {
			t.Errorf("AllocatedTTL %s: 3 creates listed the node's allocations %d times", tc.ttl, n)
		}
	}
}

// nodeAllocatedCalls is how many NodeAllocated calls the gateway made, from
// its Nomad latency histogram on /metrics.
func nodeAllocatedCalls(t *testing.T, h *harness) int {
	t.Helper()
	body := string(h.gw.Do(http.MethodGet, "/metrics", "", nil).Body)
	m := regexp.MustCompile(`sandgate_nomad_request_duration_seconds_count\{op="` + nomad.OpNodeAllocated + `"\} ([0-9]+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no NodeAllocated count")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
