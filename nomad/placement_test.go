package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// rawexecEvalID is the register evaluation of sandbox-rawexec; its answer was
// not recorded, so the tests derive it from the recorded docker evaluation.
const rawexecEvalID = "ea1334f9-75aa-d20c-ffc0-5891171e560e"

// jsonHandler serves v as JSON.
func jsonHandler(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}

// fixtureJSON decodes a fixture's body for a test to modify.
func fixtureJSON[T any](t *testing.T, name string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(loadFixture(t, name).body(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// rawexecEval is the recorded docker evaluation turned into the successful
// register evaluation of sandbox-rawexec (CreateIndex 18, as its register
// response says).
func rawexecEval(t *testing.T, status string) map[string]any {
	ev := fixtureJSON[map[string]any](t, "docker-evaluation-placement-failed")
	ev["ID"], ev["JobID"], ev["Status"], ev["CreateIndex"] = rawexecEvalID, rawexecJob, status, 18
	delete(ev, "FailedTGAllocs")
	delete(ev, "BlockedEval")
	return ev
}

func TestWaitPlacementReportsMissingDrivers(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("docker-evaluation-placement-failed", "docker-job-allocations")
	p, err := r.client().WaitPlacement(context.Background(), dockerJob, recEvalID)
	if err != nil {
		t.Fatal(err)
	}
	want := Placement{State: PlacementFailed, Reason: "no node satisfied the constraints: missing drivers: 1"}
	if p != want {
		t.Fatalf("WaitPlacement = %+v, want %+v", p, want)
	}
}

func TestWaitPlacementOnABlockedEvaluationFails(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("docker-evaluation-blocked")
	p, err := r.client().WaitPlacement(context.Background(), dockerJob, "204eee84-1906-8e53-4d2e-594898fb6ec1")
	if err != nil || p.State != PlacementFailed || !strings.Contains(p.Reason, "evaluation blocked") ||
		!strings.Contains(p.Reason, "missing drivers") {
		t.Fatalf("WaitPlacement = %+v, %v", p, err)
	}
}

func TestWaitPlacementPollsUntilRunning(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	var evalPolls, allocPolls atomic.Int32
	pending := rawexecEval(t, "pending")
	complete := rawexecEval(t, "complete")
	r.handle("GET", "/v1/evaluation/"+rawexecEvalID, func(w http.ResponseWriter, req *http.Request) {
		if evalPolls.Add(1) == 1 {
			jsonHandler(pending)(w, req)
			return
		}
		jsonHandler(complete)(w, req)
	})
	running := loadFixture(t, "rawexec-job-allocations")
	r.handle("GET", "/v1/job/"+rawexecJob+"/allocations", func(w http.ResponseWriter, req *http.Request) {
		if allocPolls.Add(1) <= 2 {
			jsonHandler([]any{})(w, req)
			return
		}
		running.write(w)
	})
	p, err := r.client().WaitPlacement(context.Background(), rawexecJob, rawexecEvalID)
	want := Placement{State: PlacementRunning, AllocID: recAllocID, NodeID: recNodeID, NodeName: "<hostname>"}
	if err != nil || p != want {
		t.Fatalf("WaitPlacement = %+v, %v; want %+v", p, err, want)
	}
	if e, a := evalPolls.Load(), allocPolls.Load(); e != 2 || a != 3 {
		t.Fatalf("polled the evaluation %d times and the allocations %d times, want 2 and 3 (no eval poll once complete)", e, a)
	}
}

func TestWaitPlacementIgnoresAllocationsOfAnEarlierJob(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	ev := rawexecEval(t, "complete")
	ev["CreateIndex"] = 100 // registered again after the recorded alloc (CreateIndex 19)
	r.handle("GET", "/v1/evaluation/"+rawexecEvalID, jsonHandler(ev))
	r.serve("rawexec-job-allocations")
	// Long enough for the evaluation's one poll on a loaded machine (60 ms
	// failed at a load average of 9, still "waiting for the evaluation").
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p, err := r.client().WaitPlacement(ctx, rawexecJob, rawexecEvalID)
	if err != nil || p != (Placement{State: PlacementPending, Reason: "waiting for an allocation"}) {
		t.Fatalf("WaitPlacement = %+v, %v", p, err)
	}
}

func TestWaitPlacementReportsAFailedAllocation(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.handle("GET", "/v1/evaluation/"+rawexecEvalID, jsonHandler(rawexecEval(t, "complete")))
	allocs := fixtureJSON[[]map[string]any](t, "rawexec-job-allocations")
	allocs[0]["ClientStatus"] = "failed"
	allocs[0]["ClientDescription"] = "Failed tasks"
	allocs[0]["TaskStates"] = map[string]any{"main": map[string]any{
		"State": "dead", "Failed": true,
		"Events": []any{map[string]any{"Type": "Driver Failure", "DisplayMessage": "failed to launch command"}},
	}}
	r.handle("GET", "/v1/job/"+rawexecJob+"/allocations", jsonHandler(allocs))
	p, err := r.client().WaitPlacement(context.Background(), rawexecJob, rawexecEvalID)
	want := `allocation 404b4841 failed (Failed tasks): task "main": failed to launch command`
	if err != nil || p.State != PlacementFailed || p.AllocID != recAllocID || p.Reason != want {
		t.Fatalf("WaitPlacement = %+v, %v; want reason %q", p, err, want)
	}
}

func TestWaitPlacementWhenCtxEnds(t *testing.T) {
	t.Parallel()
	newPending := func(t *testing.T) *Client {
		r := newReplay(t)
		r.handle("GET", "/v1/evaluation/"+rawexecEvalID, jsonHandler(rawexecEval(t, "pending")))
		r.handle("GET", "/v1/job/"+rawexecJob+"/allocations", jsonHandler([]any{}))
		return r.client()
	}
	t.Run("a deadline returns the pending observation and no error", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		p, err := newPending(t).WaitPlacement(ctx, rawexecJob, rawexecEvalID)
		if err != nil || p != (Placement{State: PlacementPending, Reason: "waiting for the evaluation"}) {
			t.Fatalf("WaitPlacement = %+v, %v", p, err)
		}
	})
	t.Run("a cancellation returns ctx's error", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		p, err := newPending(t).WaitPlacement(ctx, rawexecJob, rawexecEvalID)
		if !errors.Is(err, context.Canceled) || p.State != PlacementPending {
			t.Fatalf("WaitPlacement = %+v, %v; want pending and context.Canceled", p, err)
		}
	})
}

func TestWaitPlacementRefusesAForeignJob(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	_, err := r.client().WaitPlacement(context.Background(), "other-job", recEvalID)
	if !errors.Is(err, ErrForbiddenJob) || len(r.requests()) != 0 {
		t.Fatalf("WaitPlacement = %v after %d requests", err, len(r.requests()))
	}
}

func TestPlacementReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		failed map[string]*api.AllocationMetric
		want   string
	}{
		{"memory exhausted", map[string]*api.AllocationMetric{"sandbox": {
			NodesEvaluated: 3, NodesExhausted: 3, DimensionExhausted: map[string]int{"memory": 2, "cpu": 1},
		}}, "resources exhausted: cpu: 1, memory: 2"},
		{"no node in the datacenters", map[string]*api.AllocationMetric{"sandbox": {}},
			"no node was eligible for evaluation (check datacenters and node pool)"},
		{"nothing specific", map[string]*api.AllocationMetric{"sandbox": {NodesEvaluated: 2, NodesFiltered: 1, NodesExhausted: 1}},
			"no node fit: 2 evaluated, 1 filtered, 1 exhausted"},
		{"two groups are both named", map[string]*api.AllocationMetric{
			"b": {NodesEvaluated: 1, QuotaExhausted: []string{"cpu exhausted (500 needed > 400 limit)"}},
			"a": {NodesEvaluated: 1, ConstraintFiltered: map[string]int{"${attr.cpu.arch} = arm64": 1}},
		}, `group "a": no node satisfied the constraints: ${attr.cpu.arch} = arm64: 1; group "b": quota exhausted: cpu exhausted (500 needed > 400 limit)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := metricsReason(tt.failed); got != tt.want {
				t.Fatalf("reason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAFailedEvaluationFails(t *testing.T) {
	t.Parallel()
	p, done := evalOutcome(&api.Evaluation{Status: api.EvalStatusFailed, StatusDescription: "maximum attempts reached (5)"})
	if !done || p != (Placement{State: PlacementFailed, Reason: "evaluation failed: maximum attempts reached (5)"}) {
		t.Fatalf("evalOutcome = %+v, %v", p, done)
	}
}

// The events of a docker task the driver refused at start, as a real
// Nomad 1.6.5 client recorded them (an object where the schema wants a list
// of one map): the reason is the driver's, not "Policy allows no restarts".
func TestAFailedTaskReportsTheDriversReasonNotTheRestartPolicy(t *testing.T) {
	msg := "3 errors occurred:\n\t* failed to parse config: \n\t* Incorrect attribute value type: Inappropriate value for attribute \"labels\": list of map of string required.\n\t* Incorrect attribute value type: Inappropriate value for attribute \"ulimit\": list of map of string required.\n\n"
	a := &api.AllocationListStub{ID: "758b4752-0000-0000-0000-000000000000", ClientStatus: "failed", ClientDescription: "Failed tasks",
		TaskStates: map[string]*api.TaskState{"sandbox": {Failed: true, Events: []*api.TaskEvent{
			{Type: api.TaskReceived, DisplayMessage: "Task received by client"},
			{Type: api.TaskSetup, DisplayMessage: "Building Task Directory"},
			{Type: "Failed Validation", DisplayMessage: msg},
			{Type: api.TaskNotRestarting, DisplayMessage: "Policy allows no restarts", FailsTask: true},
		}}}}
	got := allocFailure(a)
	want := `allocation 758b4752 failed (Failed tasks): task "sandbox": Incorrect attribute value type: Inappropriate value for attribute "labels": list of map of string required.; Incorrect attribute value type: Inappropriate value for attribute "ulimit": list of map of string required.`
	if got != want {
		t.Fatalf("allocFailure:\n got %s\nwant %s", got, want)
	}
	// With nothing but the consequence, that is still said.
	a.TaskStates["sandbox"].Events = a.TaskStates["sandbox"].Events[3:]
	if got := allocFailure(a); !strings.HasSuffix(got, "Policy allows no restarts") {
		t.Fatalf("allocFailure with only the restart event: %s", got)
	}
}

// A placement Nomad refused for room (a node full: "resources exhausted")
// says so in Exhausted; one refused for a constraint does not.
func TestAnExhaustedPlacementIsMarkedSo(t *testing.T) {
	t.Parallel()
	full := &api.Evaluation{Status: api.EvalStatusComplete, BlockedEval: "b", FailedTGAllocs: map[string]*api.AllocationMetric{"sandbox": {
		NodesEvaluated: 1, NodesExhausted: 1, DimensionExhausted: map[string]int{"cpu": 1},
	}}}
	p, done := evalOutcome(full)
	if !done || p != (Placement{State: PlacementFailed, Reason: "resources exhausted: cpu: 1", Exhausted: true}) {
		t.Fatalf("evalOutcome = %+v, %v", p, done)
	}
	filtered := &api.Evaluation{Status: api.EvalStatusComplete, BlockedEval: "b", FailedTGAllocs: map[string]*api.AllocationMetric{"sandbox": {
		NodesEvaluated: 1, NodesFiltered: 1, ConstraintFiltered: map[string]int{"missing drivers": 1},
	}}}
	if p, _ := evalOutcome(filtered); p.Exhausted {
		t.Fatalf("a constraint failure is marked exhausted: %+v", p)
	}
}
