package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway/apitest"
	"sandgate/gateway/audit"
	"sandgate/gateway/gatewaytest"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
)

// assertBudgetMatchesLiveRecords: the store's budget use per node equals
// the sum over its live records (B1, B4).
func assertBudgetMatchesLiveRecords(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	live, err := h.st.List(ctx, store.Filter{LiveOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string]store.Usage{}
	for _, r := range live {
		u := sum[r.Node]
		u.Sandboxes++
		u.CPUMHz += r.CPUMHz
		u.MemoryMB += r.MemoryMB
		sum[r.Node] = u
	}
	for _, node := range []string{"worker-1", "worker-2", "control-1"} {
		got, err := h.st.NodeUsage(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if got != sum[node] {
			t.Fatalf("node %s: store budget %+v, live records sum to %+v", node, got, sum[node])
		}
	}
}

func TestConcurrentCreatesNeverOverrunANodeBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{nodes: []store.Node{{Name: "worker-1", Enrollment: "sandbox", State: "active", MaxSandboxes: 8}}})
	const n = 200
	var wg sync.WaitGroup
	statuses := make([]apitest.Reply, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
		}()
	}
	wg.Wait()
	created, refused := 0, 0
	for _, r := range statuses {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			refused++
			if r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), `"budget_exhausted"`) {
				t.Fatalf("429 without Retry-After or code: %v %s", r.Header, r.Body)
			}
		default:
			t.Fatalf("unexpected status %d: %s", r.Status, r.Body)
		}
	}
	if created != 8 || refused != n-8 {
		t.Fatalf("created %d, refused %d; want 8 and %d", created, refused, n-8)
	}
	live, _ := h.st.List(context.Background(), store.Filter{LiveOnly: true})
	if len(live) != 8 {
		t.Fatalf("%d live records, want 8", len(live))
	}
	assertBudgetMatchesLiveRecords(t, h)
}

func TestAnIdleReaperPassMakesNoNomadCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	h.sim.ResetRequests()
	if n, err := h.srv.Reap(context.Background()); n != 0 || err != nil {
		t.Fatalf("reap: %d %v", n, err)
	}
	if got := h.sim.Requests(); got != 0 {
		t.Fatalf("idle reaper pass made %d Nomad calls: %v", got, h.sim.RequestLog())
	}
	// a live sandbox that is not due costs no call either
	h.gw.Create(h.operator, nil)
	h.sim.ResetRequests()
	if n, err := h.srv.Reap(context.Background()); n != 0 || err != nil {
		t.Fatalf("reap: %d %v", n, err)
	}
	if got := h.sim.Requests(); got != 0 {
		t.Fatalf("reaper pass with nothing due made %d Nomad calls: %v", got, h.sim.RequestLog())
	}
}

func TestReconcilePurgesOrphanJobsAndEndsRecordsWhoseJobVanished(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	keep := h.gw.Create(h.operator, nil).ID
	gone := h.gw.Create(h.operator, nil).ID

	nc, err := api.NewClient(&api.Config{Address: h.simURL()})
	if err != nil {
		t.Fatal(err)
	}
	// a prefixed job with no record (a crash between register and persist, or a stray)
	orphan := api.NewBatchJob("sandgate-sbx-orphan0001", "sandgate-sbx-orphan0001", "global", 10)
	orphan.AddTaskGroup(api.NewTaskGroup("sandbox", 1).AddTask(api.NewTask("sandbox", "docker")))
	if _, _, err := nc.Jobs().Register(orphan, nil); err != nil {
		t.Fatal(err)
	}
	// a job that is not sandgate's is never touched
	other := api.NewBatchJob("billing", "billing", "global", 50)
	other.AddTaskGroup(api.NewTaskGroup("g", 1).AddTask(api.NewTask("t", "docker")))
	if _, _, err := nc.Jobs().Register(other, nil); err != nil {
		t.Fatal(err)
	}
	// the job of a live record vanishes behind sandgate's back
	if _, _, err := nc.Jobs().Deregister("sandgate-sbx-"+gone, true, nil); err != nil {
		t.Fatal(err)
	}

	if err := h.srv.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	jobs := strings.Join(h.sim.Jobs(), ",")
	if strings.Contains(jobs, "orphan0001") {
		t.Fatalf("orphan job not purged: %s", jobs)
	}
	if !strings.Contains(jobs, "billing") || !strings.Contains(jobs, keep) {
		t.Fatalf("reconcile purged a job it must keep: %s", jobs)
	}
	rec, _ := h.st.Get(ctx, gone)
	if rec.State != store.StateEnded || rec.EndReason != "job_missing" {
		t.Fatalf("record of the vanished job: %s %s", rec.State, rec.EndReason)
	}
	if rec, _ := h.st.Get(ctx, keep); rec.State != store.StateRunning {
		t.Fatalf("healthy record changed: %s", rec.State)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

func TestNomadFailuresDuringCreateLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault nomadsim.Fault
	}{
		{"register answers 500", nomadsim.Fault{Method: http.MethodPut, PathPrefix: "/v1/jobs", Status: http.StatusInternalServerError, Body: "rpc error: leader unavailable"}},
		{"register drops the connection", nomadsim.Fault{Method: http.MethodPut, PathPrefix: "/v1/jobs", Drop: true}},
		{"allocations answer 500 while placing", nomadsim.Fault{Method: http.MethodGet, PathPrefix: "/v1/job/", Status: http.StatusInternalServerError}},
		{"evaluation drops the connection while placing", nomadsim.Fault{Method: http.MethodGet, PathPrefix: "/v1/evaluation/", Drop: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			h.sim.InjectFault(c.fault)
			r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{})
			m := apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "nomad_unavailable")
			if r.Header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			if _, ok := m["token"]; ok {
				t.Fatal("a failed create returned a token")
			}
			h.sim.ClearFaults()
			live, _ := h.st.List(context.Background(), store.Filter{LiveOnly: true})
			if len(live) != 0 {
				t.Fatalf("%d records left reserved", len(live))
			}
			assertBudgetMatchesLiveRecords(t, h)
			// the purge after a lost answer may race the fault; reconcile must leave no job
			deadline := time.Now().Add(5 * time.Second)
			for len(h.sim.Jobs()) > 0 && time.Now().Before(deadline) {
				_ = h.srv.Reconcile(context.Background())
				time.Sleep(20 * time.Millisecond)
			}
			if jobs := h.sim.Jobs(); len(jobs) != 0 {
				t.Fatalf("jobs left registered: %v", jobs)
			}
		})
	}
}

func TestPlacementFailureReleasesTheBudgetAndPurgesTheJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{simConfig: func(c *nomadsim.Config) {
		for i := range c.Nodes {
			if c.Nodes[i].Name == "worker-1" {
				c.Nodes[i].Drivers = map[string]bool{"docker": false}
			}
		}
	}})
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1"})
	// Never a 201 for a sandbox Nomad would not place: a 503 (the node is
	// not full; room will not help) naming the missing driver.
	m := apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "placement_failed")
	if d, _ := m["detail"].(string); !strings.Contains(d, "driver") || r.Header.Get("Retry-After") == "" {
		t.Fatalf("want a problem naming the missing driver, with Retry-After: %v %s", r.Header, r.Body)
	}
	if _, ok := m["token"]; ok {
		t.Fatalf("a failed sandbox's void token was handed out: %s", r.Body)
	}
	if rec, err := h.st.Get(context.Background(), m["sandbox_id"].(string)); err != nil || rec.State != store.StateFailed || rec.EndReason != "placement_failed" {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if jobs := h.sim.Jobs(); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

func TestTheReaperEndsExpiredSandboxesAndPurgesTheirJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	short := h.gw.Create(h.operator, map[string]any{"ttl_seconds": 60}).ID
	long := h.gw.Create(h.operator, map[string]any{"ttl_seconds": 3600}).ID
	h.clock.Advance(61 * time.Second)
	if n, err := h.srv.Reap(context.Background()); n != 1 || err != nil {
		t.Fatalf("reap: %d %v", n, err)
	}
	jobs := strings.Join(h.sim.Jobs(), ",")
	if strings.Contains(jobs, short) || !strings.Contains(jobs, long) {
		t.Fatalf("jobs after reap: %s", jobs)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

func TestAStartingSandboxIsWatchedUntilItRunsOrTimesOut(t *testing.T) {
	t.Parallel()
	t.Run("it runs after the create answered", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOptions{simConfig: func(c *nomadsim.Config) { c.RunDelay = 300 * time.Millisecond }})
		r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
		m := r.JSON(t)
		if r.Status != http.StatusCreated || m["state"] != "starting" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := m["id"].(string)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if rec, _ := h.st.Get(context.Background(), id); rec.State == store.StateRunning && rec.AllocID != "" {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("the sandbox never became running")
	})
	t.Run("it fails and is purged when it never runs", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOptions{startTimeout: time.Millisecond, simConfig: func(c *nomadsim.Config) { c.RunDelay = time.Hour }})
		r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
		id := r.JSON(t)["id"].(string)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if rec, _ := h.st.Get(context.Background(), id); rec.State == store.StateFailed {
				if rec.EndReason != "start_timeout" || len(h.sim.Jobs()) != 0 {
					t.Fatalf("failed with %q, jobs %v", rec.EndReason, h.sim.Jobs())
				}
				assertBudgetMatchesLiveRecords(t, h)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal("the sandbox never failed")
	})
}

// Ends and purges are policy decisions: a job without the prefix is never
// purged (H9), even when reconcile is handed one; and each end is logged.
func TestLifecycleActionsAreDecidedAndLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{fake: true})
	ctx := context.Background()
	id := h.gw.Create(h.operator, map[string]any{"ttl_seconds": 60}).ID
	h.clock.Advance(30 * time.Second)
	if n, err := h.srv.Reap(ctx); n != 0 || err != nil {
		t.Fatalf("reap before expiry: %d %v", n, err)
	}
	h.clock.Advance(31 * time.Second)
	if n, err := h.srv.Reap(ctx); n != 1 || err != nil {
		t.Fatalf("reap after expiry: %d %v", n, err)
	}
	data, err := os.ReadFile(filepath.Join(h.dataDir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"entrypoint":"lifecycle"`) {
			found = strings.Contains(line, `"allow":true`) && strings.Contains(line, `"principal":"system:reaper"`) &&
				strings.Contains(line, `"sandbox_id":"`+id+`"`) && strings.Contains(line, `"action":"end expired sandgate-sbx-`+id+`"`)
		}
	}
	if !found {
		t.Fatalf("no lifecycle decision for the reaped sandbox in the log:\n%s", data)
	}
}

// rivalStore reserves a rival sandbox on the node of the first Reserve
// it sees, just before that Reserve: a concurrent create that filled the
// node between the gateway's pick and its reservation.
type rivalStore struct {
	store.Store
	once sync.Once
}

func (r *rivalStore) Reserve(ctx context.Context, rec store.Sandbox, admit func(store.ReserveFacts) error) error {
	var err error
	r.once.Do(func() {
		now := time.Now().UTC()
		err = r.Store.Reserve(ctx, store.Sandbox{
			ID: "rival", JobID: "sandgate-sbx-rival", Node: rec.Node, Principal: "operator:rival", State: store.StateStarting,
			CPUMHz: rec.CPUMHz, MemoryMB: rec.MemoryMB, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), CeilingAt: now.Add(time.Hour),
		}, func(store.ReserveFacts) error { return nil })
	})
	if err != nil {
		return err
	}
	return r.Store.Reserve(ctx, rec, admit)
}

func TestACreateWhosePickedNodeFilledMeanwhileGoesToAnotherNode(t *testing.T) {
	t.Parallel()
	oneEach := []store.Node{
		{Name: "worker-1", Enrollment: "sandbox", State: "active", MaxSandboxes: 1},
		{Name: "worker-2", Enrollment: "sandbox", State: "active", MaxSandboxes: 1},
	}
	rival := func(st store.Store) store.Store { return &rivalStore{Store: st} }

	t.Run("no node named: the other node is decided on and takes it", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOptions{nodes: oneEach, wrapStore: rival})
		r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
		if r.Status != http.StatusCreated {
			t.Fatalf("create after its node filled meanwhile: %d %s", r.Status, r.Body)
		}
		rivalRec, err := h.st.Get(context.Background(), "rival")
		if err != nil {
			t.Fatal(err)
		}
		if got := r.JSON(t)["node"]; got == rivalRec.Node {
			t.Fatalf("the create went to %v, the node the rival filled", got)
		}
		r = h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
		if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"rule_ids":["B1"]`) || !strings.Contains(string(r.Body), `"decision_id"`) {
			t.Fatalf("a create with both nodes full: %d %s; want the policy's B1 refusal", r.Status, r.Body)
		}
		assertBudgetMatchesLiveRecords(t, h)
	})
	t.Run("a node named: no other node is tried", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOptions{nodes: oneEach, wrapStore: rival})
		r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"node": "worker-1", "wait_seconds": 0})
		if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"rule_ids":["B1"]`) || !strings.Contains(string(r.Body), `"decision_id"`) {
			t.Fatalf("a create on a named node that filled meanwhile: %d %s", r.Status, r.Body)
		}
		live, _ := h.st.List(context.Background(), store.Filter{LiveOnly: true})
		if len(live) != 1 || live[0].ID != "rival" {
			t.Fatalf("live records %+v, want the rival alone", live)
		}
		assertBudgetMatchesLiveRecords(t, h)
	})
}

// TestConcurrentCreatesFillEveryNodeWithoutAFalseRefusal: with room for
// exactly as many sandboxes as there are concurrent creates, spread over
// two nodes, every create succeeds: none is refused for a node that filled
// while another had room.
func TestConcurrentCreatesFillEveryNodeWithoutAFalseRefusal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{nodes: []store.Node{
		{Name: "worker-1", Enrollment: "sandbox", State: "active", MaxSandboxes: 6},
		{Name: "worker-2", Enrollment: "sandbox", State: "active", MaxSandboxes: 6},
	}})
	const n = 12
	var wg sync.WaitGroup
	out := make([]apitest.Reply, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 0})
		}()
	}
	wg.Wait()
	for i, r := range out {
		if r.Status != http.StatusCreated {
			t.Errorf("create %d of %d with room for all: %d %s", i, n, r.Status, r.Body)
		}
	}
	assertBudgetMatchesLiveRecords(t, h)
}

// downStore goes down once a reservation has committed: from then on
// every Update fails, as a store whose database has gone away answers.
type downStore struct {
	store.Store
	down *atomic.Bool
}

func (d *downStore) Reserve(ctx context.Context, rec store.Sandbox, admit func(store.ReserveFacts) error) error {
	err := d.Store.Reserve(ctx, rec, admit)
	if err == nil {
		d.down.Store(true)
	}
	return err
}

var errStoreDown = errors.New("the database is unreachable")

func (d *downStore) Update(ctx context.Context, id string, mutate func(*store.Sandbox) error) (store.Sandbox, error) {
	if d.down.Load() {
		return store.Sandbox{}, errStoreDown
	}
	return d.Store.Update(ctx, id, mutate)
}

// TestACreateWhoseRecordCannotBeSettledLeavesNoSandboxRunning: the
// sandbox runs in Nomad, but the store fails before its record says so.
// The create is answered 503 without a token, so the sandbox must not go
// on running: its job is purged at once, and once the store answers
// again reconcile ends the record and its budget is released.
func TestACreateWhoseRecordCannotBeSettledLeavesNoSandboxRunning(t *testing.T) {
	t.Parallel()
	var ds *downStore
	h := newHarness(t, harnessOptions{wrapStore: func(st store.Store) store.Store {
		ds = &downStore{Store: st, down: new(atomic.Bool)}
		return ds
	}})
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{})
	m := apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if _, ok := m["token"]; ok {
		t.Fatalf("a create answered 503 handed out a token: %s", r.Body)
	}
	if jobs := h.sim.Jobs(); len(jobs) != 0 {
		t.Fatalf("the sandbox of a create answered 503 still has its job: %v", jobs)
	}
	live, err := h.st.List(context.Background(), store.Filter{LiveOnly: true})
	if err != nil || len(live) != 1 || live[0].State != store.StateStarting {
		t.Fatalf("while the store was down the record stays starting, holding its budget: %+v %v", live, err)
	}
	ds.down.Store(false)
	if err := h.srv.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec, err := h.st.Get(context.Background(), live[0].ID)
	if err != nil || rec.State.Live() || rec.EndReason != "job_missing" {
		t.Fatalf("after reconcile: %+v %v; want the record ended job_missing", rec, err)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

// downSink is a shared decision log that is down while down is set.
type downSink struct {
	down *atomic.Bool
}

func (d downSink) AppendDecisions(context.Context, []store.Decision) error {
	if d.down.Load() {
		return fmt.Errorf("%w: the database is unreachable", store.ErrUnavailable)
	}
	return nil
}

func (d downSink) Decisions(context.Context, store.DecisionQuery) ([]store.Decision, error) {
	return nil, nil
}

func (d downSink) PruneDecisions(context.Context, time.Time, int) (int, error) { return 0, nil }

// TestAFailedStartThatCannotBeDecidedNowIsEndedOnceItCan: the database
// of a shared store and decision log goes away between the reservation
// and the settle. The create is answered 503, and the end of its sandbox
// cannot be decided (its decision cannot be logged): nothing is done
// then, but the gateway asks again, and once the database is back the
// job is purged and the record fails, its budget released.
func TestAFailedStartThatCannotBeDecidedNowIsEndedOnceItCan(t *testing.T) {
	t.Parallel()
	down := new(atomic.Bool)
	gw := gatewaytest.New(t, gatewaytest.Options{
		WrapStore:   func(st store.Store) store.Store { return &downStore{Store: st, down: down} },
		AuditConfig: func(c *audit.Config) { c.Shared = downSink{down: down} },
	})
	h := harnessOf(t, gw)
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{})
	apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if jobs := h.sim.Jobs(); len(jobs) != 1 {
		t.Fatalf("while nothing can be decided, the job stays: %v", jobs)
	}
	down.Store(false)
	deadline := time.Now().Add(time.Minute)
	for {
		live, err := h.st.List(context.Background(), store.Filter{LiveOnly: true})
		if err == nil && len(live) == 0 && len(h.sim.Jobs()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the database came back: live %v (%v), jobs %v", live, err, h.sim.Jobs())
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
	all, err := h.st.List(context.Background(), store.Filter{})
	if err != nil || len(all) != 1 || all[0].State != store.StateFailed || all[0].EndReason != "record_failed" {
		t.Fatalf("the record: %+v %v; want failed, record_failed", all, err)
	}
	assertBudgetMatchesLiveRecords(t, h)
}

// A destroy by id that races the create (the operator found the sandbox
// starting in the list) wins: the create, still waiting for the
// placement, answers 410 sandbox_ended naming the sandbox and its end,
// hands out no token, and nothing is left in Nomad or in the budget.
func TestADestroyThatRacesTheCreateIsWhatTheCreateAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{simConfig: func(c *nomadsim.Config) { c.RunDelay = time.Hour }})
	answered := make(chan apitest.Reply, 1)
	go func() {
		answered <- h.gw.Do(http.MethodPost, "/v1/sandboxes", h.operator, map[string]any{"wait_seconds": 60})
	}()
	var id string
	deadline := time.Now().Add(20 * time.Second)
	for id == "" {
		live, err := h.st.List(t.Context(), store.Filter{LiveOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(live) == 1 && len(h.sim.Jobs()) == 1 {
			id = live[0].ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the create never registered its job")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status >= 300 {
		t.Fatalf("destroy of the starting sandbox: %d %s", r.Status, r.Body)
	}
	var r apitest.Reply
	select {
	case r = <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("the create did not answer within 60 s of the destroy")
	}
	m := apitest.ExpectProblem(t, r, http.StatusGone, "sandbox_ended")
	if m["sandbox_id"] != id || m["end_reason"] != "destroyed" || m["token"] != nil {
		t.Fatalf("the create's answer: %s", r.Body)
	}
	if jobs := h.sim.Jobs(); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	assertBudgetMatchesLiveRecords(t, h)
}
