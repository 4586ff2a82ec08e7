package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// hogJob is another scheduler's job (no sandbox prefix): a docker task of
// the suite's busybox image pinned to node, holding cpu MHz there.
func hogJob(id, node string, cpu int64) *api.Job {
	job := api.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	job.Constrain(api.NewConstraint("${node.unique.name}", "=", node))
	task := api.NewTask("hog", "docker").
		SetConfig("image", imageBusybox).
		SetConfig("command", "sleep").
		SetConfig("args", []string{"3600"}).
		Require(&api.Resources{CPU: new(int(cpu)), MemoryMB: new(64)})
	tg := api.NewTaskGroup("hog", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	job.AddTaskGroup(tg)
	return job
}

// placeHog registers job in the gateway's namespace (its cleanup purges
// it) and waits until Nomad has given it an allocation: from then on its
// resources are held on the node.
func placeHog(t testing.TB, g *gw, job *api.Job) {
	t.Helper()
	if err := placeHogErr(g, job); err != nil {
		t.Fatal(err)
	}
}

// placeHogErr is placeHog for a goroutine other than the test's (a proxy
// hook): it returns what went wrong.
func placeHogErr(g *gw, job *api.Job) error {
	if _, _, err := g.nomad.Jobs().Register(job, nil); err != nil {
		return fmt.Errorf("register %s: %w", *job.ID, err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		allocs, _, err := g.nomad.Jobs().Allocations(*job.ID, false, nil)
		if err != nil {
			continue
		}
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusPending || a.ClientStatus == api.AllocClientStatusRunning {
				return nil
			}
		}
	}
	return fmt.Errorf("job %s got no allocation within 60 s", *job.ID)
}

// sandboxJobsOf are the sandbox jobs left in the gateway's namespace.
func sandboxJobsOf(t testing.TB, g *gw) []string {
	var out []string
	for _, id := range g.jobs(t) {
		if strings.HasPrefix(id, "sandgate-sbx-") {
			out = append(out, id)
		}
	}
	return out
}

// TestAFullNodeIsRefusedBeforeNomad: a job of another scheduler holds all
// but 300 MHz of the node; a create of 500 MHz that the gateway's budget
// (1,000 MHz) allows is refused by the policy (429 budget_exhausted, B1,
// Retry-After) and nothing reaches Nomad. Before, it answered 201 with
// state failed, "resources exhausted: cpu: 1".
func TestAFullNodeIsRefusedBeforeNomad(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-full"
	a, g := ownNode(t, gwNode{Name: node})
	t.Logf("node %s: Nomad can allocate %d MHz, %d MB", node, allocatable(a).cpuMHz, allocatable(a).memoryMB)
	placeHog(t, g, hogJob("hog-full", node, allocatable(a).cpuMHz-300))

	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{
		"node": node, "image": imageBusybox, "cpu_mhz": 500, "memory_mb": 128})
	t.Logf("create on a full node: %s", r)
	m := r.JSON(t)
	if r.Status != http.StatusTooManyRequests || m["code"] != "budget_exhausted" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("create on a full node: %s", r)
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, "held by other jobs") {
		t.Fatalf("the refusal does not name the other jobs' holding: %s", r)
	}
	if rules, _ := m["rule_ids"].([]any); len(rules) != 1 || rules[0] != "B1" {
		t.Fatalf("rule_ids: %s", r)
	}
	if jobs := sandboxJobsOf(t, g); len(jobs) != 0 {
		t.Fatalf("a sandbox job reached Nomad: %v", jobs)
	}
	if used := g.hostUse(t, node); used != [3]int64{} {
		t.Fatalf("budget use after the refusal: %v", used)
	}
	// What still fits is placed and runs.
	g.create(t, g.operator, map[string]any{"node": node, "image": imageBusybox, "cpu_mhz": 200, "memory_mb": 128})
}

// TestTheRoomTakenAfterAdmissionAnswersPlacementFailed: the other job takes
// the node's room just as the gateway registers the admitted sandbox's job
// (a proxy runs it then). Nomad refuses to place the sandbox; the create
// answers 429 placement_failed with Nomad's reason and Retry-After (never
// a 201), no sandbox job is left and the budget is released.
func TestTheRoomTakenAfterAdmissionAnswersPlacementFailed(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-race"
	p := newNomadProxy(t, suite.server.HTTPAddr)
	a, g := ownNodeWith(t, gwNode{Name: node}, gwOptions{NomadAddress: p.url()})
	var (
		once   sync.Once
		hogErr error
	)
	p.inject(proxyFault{Method: http.MethodPut, PathPrefix: "/v1/jobs", Before: func() {
		once.Do(func() { hogErr = placeHogErr(g, hogJob("hog-race", node, allocatable(a).cpuMHz-300)) })
	}})

	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{
		"node": node, "image": imageBusybox, "cpu_mhz": 500, "memory_mb": 128})
	t.Logf("create whose room was taken after admission: %s", r)
	if hogErr != nil {
		t.Fatal(hogErr)
	}
	m := r.JSON(t)
	if r.Status != http.StatusTooManyRequests || m["code"] != "placement_failed" || r.Header.Get("Retry-After") == "" || m["token"] != nil {
		t.Fatalf("create whose room was taken: %s", r)
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, "resources exhausted") {
		t.Fatalf("detail lacks Nomad's reason: %s", r)
	}
	id, _ := m["sandbox_id"].(string)
	st := g.status(t, id)
	if st["state"] != "failed" || st["end_reason"] != "placement_failed" {
		t.Fatalf("the record: %v", st)
	}
	if jobs := sandboxJobsOf(t, g); len(jobs) != 0 {
		t.Fatalf("sandbox jobs left: %v", jobs)
	}
	if used := g.hostUse(t, node); used != [3]int64{} {
		t.Fatalf("budget use after the failed placement: %v", used)
	}
}
