package nomad

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// PlacementState is where a job's placement stands.
type PlacementState string

// The placement states.
const (
	// PlacementPending: no allocation is running yet and nothing has failed.
	PlacementPending PlacementState = "pending"
	// PlacementRunning: an allocation of the job is running.
	PlacementRunning PlacementState = "running"
	// PlacementFailed: Nomad could not place the job (no node fits, a blocked
	// or failed evaluation) or its allocation failed, was lost or stopped.
	PlacementFailed PlacementState = "failed"
)

// Placement is one observation of a job's placement.
type Placement struct {
	State PlacementState
	// AllocID, NodeID and NodeName name the allocation observed (the running
	// one, the failed one, or the pending one); empty when there is none.
	AllocID, NodeID, NodeName string
	// Reason says, for people, why placement failed, e.g. "no node satisfied
	// the constraints: missing drivers: 1", or what a pending placement waits
	// for. Empty when running.
	Reason string
	// Exhausted reports a failed placement whose ground is resources: Nomad
	// found the node(s) full (NodesExhausted, DimensionExhausted such as
	// "cpu"). Room may free later, unlike a missing driver.
	Exhausted bool
}

// pollState carries what WaitPlacement learned from earlier polls.
type pollState struct {
	evalSettled bool   // the evaluation completed without failures
	evalIndex   uint64 // its CreateIndex: older allocations are a previous registration's
}

// WaitPlacement polls the evaluation evalID (skipped when empty) and the
// allocations of job jobID every PollInterval until an allocation runs
// (PlacementRunning) or placement fails (PlacementFailed, with a Reason).
// Allocations created before the evaluation, left over from an earlier job of
// the same ID, are ignored.
//
// When ctx ends first, the result depends on how it ended:
//   - deadline exceeded: the last observation, with State PlacementPending,
//     and a nil error: "still pending", the caller decides what to do;
//   - cancelled: the last observation and ctx's error (wrapped; errors.Is
//     context.Canceled holds).
//
// A failed poll request returns the last observation and the request's error.
func (c *Client) WaitPlacement(ctx context.Context, jobID, evalID string) (Placement, error) {
	start := time.Now()
	p, err := c.waitPlacement(ctx, jobID, evalID)
	c.observe(OpWaitPlacement, start, err)
	return p, err
}

func (c *Client) waitPlacement(ctx context.Context, jobID, evalID string) (Placement, error) {
	last := Placement{State: PlacementPending, Reason: "waiting for the evaluation"}
	if err := c.checkJobID(OpWaitPlacement, jobID); err != nil {
		return last, err
	}
	if evalID != "" && !validID(evalID) {
		return last, c.newError(OpWaitPlacement, 0, fmt.Sprintf("invalid evaluation id %q", evalID), ErrNotFound)
	}
	st := &pollState{evalSettled: evalID == ""}
	tick := time.NewTicker(c.cfg.PollInterval)
	defer tick.Stop()
	for {
		p, err := c.pollPlacement(ctx, jobID, evalID, st)
		if err != nil {
			if ctx.Err() != nil {
				return placementCtxDone(ctx, last)
			}
			return last, err
		}
		if p.State != PlacementPending {
			return p, nil
		}
		last = p
		select {
		case <-ctx.Done():
			return placementCtxDone(ctx, last)
		case <-tick.C:
		}
	}
}

// placementCtxDone is WaitPlacement's answer when ctx ended.
func placementCtxDone(ctx context.Context, last Placement) (Placement, error) {
	last.State = PlacementPending
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return last, nil
	}
	return last, fmt.Errorf("nomad: %s: %w", OpWaitPlacement, ctx.Err())
}

// pollPlacement makes one observation: the evaluation (until it settles),
// then the job's allocations.
func (c *Client) pollPlacement(ctx context.Context, jobID, evalID string, st *pollState) (Placement, error) {
	if !st.evalSettled {
		ev, err := run(ctx, c, OpWaitPlacement, func(ctx context.Context) (*api.Evaluation, error) {
			ev, _, err := c.api.Evaluations().Info(evalID, query(ctx))
			return ev, err
		})
		if err != nil {
			return Placement{}, err
		}
		if ev.JobID != jobID {
			return Placement{}, c.newError(OpWaitPlacement, 0, fmt.Sprintf("evaluation %s belongs to job %q, not %q", evalID, ev.JobID, jobID), nil)
		}
		st.evalIndex = ev.CreateIndex
		if p, done := evalOutcome(ev); done {
			return p, nil
		}
		st.evalSettled = ev.Status == api.EvalStatusComplete
	}
	stubs, err := run(ctx, c, OpWaitPlacement, func(ctx context.Context) ([]*api.AllocationListStub, error) {
		return c.jobAllocs(ctx, OpWaitPlacement, jobID)
	})
	if err != nil {
		return Placement{}, err
	}
	return allocOutcome(stubs, st), nil
}

// evalOutcome reports a failed placement from the evaluation alone.
func evalOutcome(ev *api.Evaluation) (Placement, bool) {
	failed := func(reason string) (Placement, bool) {
		return Placement{State: PlacementFailed, Reason: reason, Exhausted: exhausted(ev.FailedTGAllocs)}, true
	}
	switch ev.Status {
	case api.EvalStatusFailed:
		return failed(joinReason("evaluation failed", ev.StatusDescription, metricsReason(ev.FailedTGAllocs)))
	case api.EvalStatusCancelled:
		return failed(joinReason("evaluation canceled", ev.StatusDescription, ""))
	case api.EvalStatusBlocked:
		return failed(joinReason("evaluation blocked", "", orDefault(metricsReason(ev.FailedTGAllocs), ev.StatusDescription)))
	case api.EvalStatusComplete:
		if len(ev.FailedTGAllocs) > 0 || ev.BlockedEval != "" {
			return failed(orDefault(metricsReason(ev.FailedTGAllocs), "placement blocked: evaluation "+ev.BlockedEval))
		}
	}
	return Placement{}, false
}

// allocOutcome reads the job's allocations: a running one wins; otherwise
// the newest decides (terminal: failed; pending: pending).
func allocOutcome(stubs []*api.AllocationListStub, st *pollState) Placement {
	var newest *api.AllocationListStub
	for _, a := range stubs {
		if a.CreateIndex < st.evalIndex {
			continue
		}
		if a.ClientStatus == api.AllocClientStatusRunning {
			return Placement{State: PlacementRunning, AllocID: a.ID, NodeID: a.NodeID, NodeName: a.NodeName}
		}
		if newest == nil || a.CreateIndex > newest.CreateIndex {
			newest = a
		}
	}
	if newest == nil {
		reason := "waiting for the evaluation"
		if st.evalSettled {
			reason = "waiting for an allocation"
		}
		return Placement{State: PlacementPending, Reason: reason}
	}
	p := Placement{AllocID: newest.ID, NodeID: newest.NodeID, NodeName: newest.NodeName}
	switch newest.ClientStatus {
	case api.AllocClientStatusFailed, api.AllocClientStatusLost, api.AllocClientStatusComplete:
		p.State = PlacementFailed
		p.Reason = allocFailure(newest)
	default:
		p.State = PlacementPending
		p.Reason = fmt.Sprintf("allocation %s is %s on node %q", shortID(newest.ID), newest.ClientStatus, newest.NodeName)
	}
	return p
}

// allocFailure describes a terminal allocation with its failed task's last
// event, e.g. `allocation 404b4841 failed: task "main": Failed to pull image`.
func allocFailure(a *api.AllocationListStub) string {
	reason := fmt.Sprintf("allocation %s %s", shortID(a.ID), a.ClientStatus)
	if a.ClientDescription != "" {
		reason += " (" + a.ClientDescription + ")"
	}
	names := make([]string, 0, len(a.TaskStates))
	for name := range a.TaskStates {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ts := a.TaskStates[name]
		if ts == nil || !ts.Failed {
			continue
		}
		if cause := taskFailureCause(ts.Events); cause != "" {
			return fmt.Sprintf("%s: task %q: %s", reason, name, cause)
		}
	}
	return reason
}

// consequenceEvents are task events that follow a failure without saying
// what it was ("Policy allows no restarts").
var consequenceEvents = map[string]bool{
	api.TaskNotRestarting: true, api.TaskRestarting: true, api.TaskKilling: true, api.TaskKilled: true,
	api.TaskReceived: true, api.TaskSetup: true, api.TaskStarted: true,
}

// taskFailureCause is the message of the newest event that says why a task
// failed (the driver's, validation or setup error, e.g. `Inappropriate value
// for attribute "ulimit": list of map of string required`), on one line;
// else the newest message at all.
func taskFailureCause(events []*api.TaskEvent) string {
	var fallback string
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e == nil || e.DisplayMessage == "" {
			continue
		}
		if !consequenceEvents[e.Type] {
			return oneLine(e.DisplayMessage)
		}
		if fallback == "" {
			fallback = oneLine(e.DisplayMessage)
		}
	}
	return fallback
}

// oneLine folds a go-multierror text ("3 errors occurred:\n\t* a\n\t* b")
// into "a; b".
func oneLine(msg string) string {
	msg = strings.TrimSpace(msg)
	if head, rest, ok := strings.Cut(msg, "\n\t* "); ok && strings.HasSuffix(head, "occurred:") {
		var parts []string
		for p := range strings.SplitSeq(rest, "\n\t* ") {
			if p = strings.TrimSpace(p); p != "" && !strings.HasSuffix(p, ":") {
				parts = append(parts, p)
			}
		}
		msg = strings.Join(parts, "; ")
	}
	return strings.Join(strings.Fields(msg), " ")
}

// metricsReason explains why task groups could not be placed, from the
// scheduler's metrics: filtered constraints, exhausted dimensions, quotas.
// A single group's reason is unprefixed; several are `group "g": ...` each.
func metricsReason(failed map[string]*api.AllocationMetric) string {
	groups := make([]string, 0, len(failed))
	for g := range failed {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		r := metricReason(failed[g])
		if len(groups) > 1 {
			r = fmt.Sprintf("group %q: %s", g, r)
		}
		parts = append(parts, r)
	}
	return strings.Join(parts, "; ")
}

// exhausted reports a placement metric that found a node full.
func exhausted(failed map[string]*api.AllocationMetric) bool {
	for _, m := range failed {
		if m != nil && (m.NodesExhausted > 0 || len(m.DimensionExhausted) > 0) {
			return true
		}
	}
	return false
}

// metricReason explains one task group's placement failure.
func metricReason(m *api.AllocationMetric) string {
	if m == nil {
		return "no placement metrics"
	}
	var parts []string
	if m.NodesEvaluated == 0 {
		parts = append(parts, "no node was eligible for evaluation (check datacenters and node pool)")
	}
	add := func(label string, counts map[string]int) {
		if len(counts) > 0 {
			parts = append(parts, label+": "+countList(counts))
		}
	}
	add("no node satisfied the constraints", m.ConstraintFiltered)
	add("node classes filtered", m.ClassFiltered)
	add("resources exhausted", m.DimensionExhausted)
	add("node classes exhausted", m.ClassExhausted)
	if len(m.QuotaExhausted) > 0 {
		parts = append(parts, "quota exhausted: "+strings.Join(m.QuotaExhausted, ", "))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no node fit: %d evaluated, %d filtered, %d exhausted",
			m.NodesEvaluated, m.NodesFiltered, m.NodesExhausted)
	}
	return strings.Join(parts, "; ")
}

// countList renders {"missing drivers": 1} as "missing drivers: 1", sorted.
func countList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// joinReason joins a head with optional detail parts.
func joinReason(head, desc, metrics string) string {
	for _, s := range []string{desc, metrics} {
		if s != "" {
			head += ": " + s
		}
	}
	return head
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// shortID is the first 8 characters of an ID, as Nomad's CLI prints them.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
