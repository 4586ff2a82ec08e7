package nomadsim

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// simJob is a registered job. Fields are guarded by Server.mu.
type simJob struct {
	job          *api.Job
	spec         string // canonical submitted spec, to spot no-op re-registers
	blocked      string // the job's blocked evaluation, "" when none
	deploymentID string
}

// The evaluation vocabulary Nomad uses.
const (
	evalPending  = "pending"
	evalComplete = "complete"
	evalBlocked  = "blocked"
	evalCanceled = "canceled"

	triggerRegister   = "job-register"
	triggerDeregister = "job-deregister"
	triggerQueued     = "queued-allocs"
	triggerNodeUpdate = "node-update"

	descNotNeeded = "alloc not needed due to job update"
	descLost      = "alloc is lost since its node is down"
)

func (s *Server) newEvalLocked(job *api.Job, trigger string, index uint64, now time.Time) *api.Evaluation {
	e := &api.Evaluation{
		ID: newUUID(), Priority: *job.Priority, Type: *job.Type, TriggeredBy: trigger,
		Namespace: *job.Namespace, JobID: *job.ID, JobModifyIndex: *job.JobModifyIndex,
		Status: evalPending, SnapshotIndex: index, CreateIndex: index, ModifyIndex: index,
		CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
	}
	s.evals[e.ID] = e
	return e
}

// scheduleLocked runs the evaluation for sj: it places the missing
// allocations of every task group and stops surplus ones. Placements that
// fail leave the eval complete with FailedTGAllocs and a blocked eval, as
// Nomad's generic scheduler does.
func (s *Server) scheduleLocked(sj *simJob, eval *api.Evaluation, now time.Time) {
	job := sj.job
	failed := map[string]*api.AllocationMetric{}
	queued := map[string]int{}
	for _, tg := range job.TaskGroups {
		live := s.liveAllocsLocked(*job.ID, *tg.Name)
		want := 0
		if !*job.Stop {
			want = *tg.Count
		}
		for len(live) > want {
			last := live[len(live)-1]
			s.stopAllocLocked(last, descNotNeeded)
			live = live[:len(live)-1]
		}
		queued[*tg.Name] = 0
		used := map[int]bool{}
		for _, a := range live {
			used[allocIndex(a.a.Name)] = true
		}
		// A batch allocation that ended by itself (complete, or failed
		// without reschedules, which the simulator never does) keeps its
		// slot: re-evaluating the job does not run it again.
		have := len(live)
		if *job.Type == api.JobTypeBatch {
			for _, a := range s.finishedBatchAllocsLocked(*job.ID, *tg.Name, *job.JobModifyIndex) {
				if i := allocIndex(a.a.Name); !used[i] {
					used[i] = true
					have++
				}
			}
		}
		next := 0
		for i := have; i < want; i++ {
			start := time.Now()
			node, metric := s.selectNodeLocked(job, tg)
			metric.AllocationTime = time.Since(start)
			if node == nil {
				metric.CoalescedFailures = want - i - 1
				failed[*tg.Name] = metric
				queued[*tg.Name] = want - i
				break
			}
			for used[next] {
				next++
			}
			used[next] = true
			s.createAllocLocked(sj, eval, tg, node, metric, next, now)
		}
	}
	eval.QueuedAllocations = queued
	eval.Status = evalComplete
	eval.ModifyIndex = s.index
	eval.ModifyTime = time.Now().UnixNano()
	if len(failed) > 0 {
		eval.FailedTGAllocs = failed
		if eval.ID == sj.blocked {
			eval.Status = evalBlocked // reblocked: still waiting for capacity
		} else {
			// A job has one blocked evaluation: a newer one cancels the
			// older (real-lost-job-evaluations-after-restart.json).
			if old := s.evals[sj.blocked]; old != nil {
				old.Status = evalCanceled
				old.StatusDescription = fmt.Sprintf("existing blocked evaluation exists for job %q", *job.ID)
				old.ModifyIndex, old.ModifyTime = s.nextIndexLocked(), time.Now().UnixNano()
			}
			b := s.newEvalLocked(job, triggerQueued, s.nextIndexLocked(), time.Now())
			b.Status = evalBlocked
			b.StatusDescription = "created to place remaining allocations"
			b.PreviousEval = eval.ID
			b.FailedTGAllocs = failed
			b.EscapedComputedClass = escapesComputedClass(job)
			b.DeploymentID = ""
			eval.BlockedEval = b.ID
			sj.blocked = b.ID
		}
	} else if eval.ID == sj.blocked {
		sj.blocked = ""
		eval.FailedTGAllocs = nil
	}
	s.refreshJobStatusLocked(sj)
}

// escapesComputedClass mirrors Nomad: constraints on unique node values
// cannot be judged by node class.
func escapesComputedClass(job *api.Job) bool {
	check := func(cs []*api.Constraint) bool {
		for _, c := range cs {
			if c != nil && (containsUnique(c.LTarget) || containsUnique(c.RTarget)) {
				return true
			}
		}
		return false
	}
	if check(job.Constraints) {
		return true
	}
	for _, tg := range job.TaskGroups {
		if check(tg.Constraints) {
			return true
		}
		for _, t := range tg.Tasks {
			if check(t.Constraints) {
				return true
			}
		}
	}
	return false
}

func containsUnique(target string) bool {
	return strings.Contains(target, "unique.") || strings.Contains(target, "${meta.")
}

// selectNodeLocked picks a node for one allocation of tg, or returns nil and
// the metric that explains why none fits. Nodes that are not ready,
// ineligible or draining are not candidates at all (Nomad counts only ready
// nodes); candidates are filtered by job constraints, then drivers, then
// group and task constraints, then by resources.
func (s *Server) selectNodeLocked(job *api.Job, tg *api.TaskGroup) (*simNode, *api.AllocationMetric) {
	m := &api.AllocationMetric{NodesAvailable: map[string]int{}}
	var candidates []*simNode
	for _, n := range s.nodes {
		if !nodeInPool(job, n.n) {
			continue
		}
		if n.n.Status != api.NodeStatusReady || n.n.Drain || n.n.SchedulingEligibility != api.NodeSchedulingEligible {
			continue
		}
		m.NodesInPool++
		if !datacenterMatches(job.Datacenters, n.n.Datacenter) {
			continue
		}
		m.NodesAvailable[n.n.Datacenter]++
		candidates = append(candidates, n)
	}
	var best *simNode
	bestLoad := 0
	for _, n := range candidates {
		m.NodesEvaluated++
		if reason := feasibility(job, tg, n.n); reason != "" {
			m.NodesFiltered++
			if m.ConstraintFiltered == nil {
				m.ConstraintFiltered = map[string]int{}
			}
			m.ConstraintFiltered[reason]++
			continue
		}
		if dim := s.exhaustedLocked(n, tg); dim != "" {
			m.NodesExhausted++
			if m.DimensionExhausted == nil {
				m.DimensionExhausted = map[string]int{}
			}
			m.DimensionExhausted[dim]++
			continue
		}
		load := s.liveAllocsOnNodeLocked(n.n.ID)
		if best == nil || load < bestLoad {
			best, bestLoad = n, load
		}
	}
	if best != nil {
		score := 1 / float64(bestLoad+2)
		m.ScoreMetaData = []*api.NodeScoreMeta{{
			NodeID: best.n.ID, NormScore: score,
			Scores: map[string]float64{"binpack": score, "job-anti-affinity": 0, "node-reschedule-penalty": 0, "node-affinity": 0},
		}}
	}
	return best, m
}

func nodeInPool(job *api.Job, n *api.Node) bool {
	pool := ""
	if job.NodePool != nil {
		pool = *job.NodePool
	}
	return pool == "" || pool == "all" || pool == n.NodePool
}

// feasibility returns "" when n can run tg, else the ConstraintFiltered key
// Nomad would report: the constraint's string or "missing drivers".
func feasibility(job *api.Job, tg *api.TaskGroup, n *api.Node) string {
	for _, c := range job.Constraints {
		if !constraintMatches(c, n) {
			return constraintString(c)
		}
	}
	for _, t := range tg.Tasks {
		if d := n.Drivers[t.Driver]; d == nil || !d.Detected || !d.Healthy {
			return "missing drivers"
		}
	}
	for _, c := range tg.Constraints {
		if !constraintMatches(c, n) {
			return constraintString(c)
		}
	}
	for _, t := range tg.Tasks {
		for _, c := range t.Constraints {
			if !constraintMatches(c, n) {
				return constraintString(c)
			}
		}
	}
	return ""
}

// exhaustedLocked returns the resource dimension ("cpu", "memory", "disk")
// that tg would overcommit on n, or "".
func (s *Server) exhaustedLocked(n *simNode, tg *api.TaskGroup) string {
	cpu, mem, disk := groupAsk(tg)
	for _, id := range s.allocOrder {
		a := s.allocs[id]
		ar := a.a.AllocatedResources
		if a.a.NodeID != n.n.ID || allocTerminal(a.a) || ar == nil {
			continue
		}
		for _, tr := range ar.Tasks {
			cpu += int(tr.Cpu.CpuShares)
			mem += int(tr.Memory.MemoryMB)
		}
		disk += int(ar.Shared.DiskMB)
	}
	// Nomad fits within NodeResources less ReservedResources.
	nr, rr := n.n.NodeResources, n.n.ReservedResources
	switch {
	case int64(cpu) > nr.Cpu.CpuShares-int64(rr.Cpu.CpuShares): //nolint:gosec // G115: MHz
		return "cpu"
	case int64(mem) > nr.Memory.MemoryMB-int64(rr.Memory.MemoryMB): //nolint:gosec // G115: MB
		return "memory"
	case disk > deref(n.n.Resources.DiskMB):
		return "disk"
	}
	return ""
}

func groupAsk(tg *api.TaskGroup) (cpu, mem, disk int) {
	for _, t := range tg.Tasks {
		if t.Resources != nil {
			cpu += deref(t.Resources.CPU)
			mem += deref(t.Resources.MemoryMB)
		}
	}
	if tg.EphemeralDisk != nil {
		disk = deref(tg.EphemeralDisk.SizeMB)
	}
	return cpu, mem, disk
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// liveAllocsLocked returns the job's non-terminal allocations of group tg
// in creation order.
func (s *Server) liveAllocsLocked(jobID, tg string) []*simAlloc {
	var out []*simAlloc
	for _, id := range s.allocOrder {
		a := s.allocs[id]
		if a.a.JobID == jobID && a.a.TaskGroup == tg && !allocTerminal(a.a) {
			out = append(out, a)
		}
	}
	return out
}

// finishedBatchAllocsLocked returns the allocations of group tg of the
// job's current version (created at or after jobModifyIndex) that ended on
// their own: DesiredStatus still run, ClientStatus complete or failed.
func (s *Server) finishedBatchAllocsLocked(jobID, tg string, jobModifyIndex uint64) []*simAlloc {
	var out []*simAlloc
	for _, id := range s.allocOrder {
		a := s.allocs[id]
		if a.a.JobID != jobID || a.a.TaskGroup != tg || a.a.CreateIndex < jobModifyIndex || a.a.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		if a.a.ClientStatus == api.AllocClientStatusComplete || a.a.ClientStatus == api.AllocClientStatusFailed {
			out = append(out, a)
		}
	}
	return out
}

func (s *Server) liveAllocsOnNodeLocked(nodeID string) int {
	n := 0
	for _, a := range s.allocs {
		if a.a.NodeID == nodeID && !allocTerminal(a.a) {
			n++
		}
	}
	return n
}

func (s *Server) liveAllocCountLocked() int {
	n := 0
	for _, a := range s.allocs {
		if !allocTerminal(a.a) {
			n++
		}
	}
	return n
}

// allocTerminal is Nomad's Allocation.TerminalStatus.
func allocTerminal(a *api.Allocation) bool {
	switch a.DesiredStatus {
	case api.AllocDesiredStatusStop, api.AllocDesiredStatusEvict:
		return true
	}
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// refreshJobStatusLocked applies Nomad's job status rule: running while any
// allocation is live, pending while an evaluation is blocked (or nothing was
// ever placed), dead once stopped or once every allocation is terminal.
func (s *Server) refreshJobStatusLocked(sj *simJob) {
	status := "pending"
	hasAllocs := false
	for _, a := range s.allocs {
		if a.a.JobID != *sj.job.ID || a.a.CreateIndex < *sj.job.CreateIndex {
			continue
		}
		hasAllocs = true
		if !allocTerminal(a.a) {
			status = "running"
			break
		}
	}
	if status != "running" {
		switch {
		case sj.blocked != "":
			status = "pending"
		case *sj.job.Stop, hasAllocs:
			status = "dead"
		}
	}
	if *sj.job.Status != status {
		sj.job.Status = new(status)
		sj.job.ModifyIndex = new(s.nextIndexLocked())
	}
}

// retryBlockedLocked re-runs every blocked evaluation (after a node became
// eligible or ready) and returns the IDs it processed and their index.
func (s *Server) retryBlockedLocked() ([]string, uint64) {
	var ids []string
	jobs := make([]*simJob, 0, len(s.jobs))
	for _, sj := range s.jobs {
		if sj.blocked != "" {
			jobs = append(jobs, sj)
		}
	}
	if len(jobs) == 0 {
		return nil, 0
	}
	sort.Slice(jobs, func(i, j int) bool { return *jobs[i].job.ID < *jobs[j].job.ID })
	index := s.nextIndexLocked()
	for _, sj := range jobs {
		e := s.evals[sj.blocked]
		ids = append(ids, e.ID)
		s.scheduleLocked(sj, e, time.Now())
	}
	return ids, index
}

// createAllocLocked places one allocation of tg on node.
func (s *Server) createAllocLocked(sj *simJob, eval *api.Evaluation, tg *api.TaskGroup, node *simNode, m *api.AllocationMetric, idx int, now time.Time) {
	index := s.nextIndexLocked()
	job := sj.job
	snapshot := copyJob(job)
	snapshot.Status = new("pending")
	cpu, mem, disk := groupAsk(tg)
	a := &api.Allocation{
		ID: newUUID(), Namespace: *job.Namespace, EvalID: eval.ID,
		Name:   fmt.Sprintf("%s.%s[%d]", *job.ID, *tg.Name, idx),
		NodeID: node.n.ID, NodeName: node.n.Name, JobID: *job.ID, Job: snapshot, TaskGroup: *tg.Name,
		// The deprecated Resources fields are still on a v1.6.5 agent's wire.
		Resources: &api.Resources{ //nolint:staticcheck // SA1019: recorded in rawexec-allocation.json
			CPU: new(cpu), Cores: new(0), MemoryMB: new(mem), MemoryMaxMB: new(mem), DiskMB: new(disk), IOPS: new(0),
		},
		TaskResources: map[string]*api.Resources{}, //nolint:staticcheck // SA1019: recorded as well
		AllocatedResources: &api.AllocatedResources{
			Tasks: map[string]*api.AllocatedTaskResources{}, Shared: api.AllocatedSharedResources{DiskMB: int64(disk)},
		},
		Metrics:           m,
		DesiredStatus:     api.AllocDesiredStatusRun,
		ClientStatus:      api.AllocClientStatusPending,
		ClientDescription: "No tasks have started",
		TaskStates:        map[string]*api.TaskState{},
		DeploymentID:      sj.deploymentID,
		NetworkStatus:     &api.AllocNetworkStatus{},
		CreateIndex:       index, ModifyIndex: index, AllocModifyIndex: index,
		CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
	}
	sa := &simAlloc{a: a, logs: map[string]*taskLogs{}}
	sa.ctx, sa.cancel = context.WithCancel(s.ctx)
	for _, t := range tg.Tasks {
		var res api.Resources
		if t.Resources != nil {
			res = *t.Resources
		}
		a.TaskResources[t.Name] = &res //nolint:staticcheck // SA1019: see above
		a.AllocatedResources.Tasks[t.Name] = &api.AllocatedTaskResources{
			Cpu:    api.AllocatedCpuResources{CpuShares: int64(deref(res.CPU))},
			Memory: api.AllocatedMemoryResources{MemoryMB: int64(deref(res.MemoryMB)), MemoryMaxMB: int64(deref(res.MemoryMaxMB))},
		}
		a.TaskStates[t.Name] = &api.TaskState{State: "pending", Events: []*api.TaskEvent{
			taskEvent("Received", "Task received by client", nil, now),
			taskEvent("Task Setup", "Building Task Directory", map[string]string{"message": "Building Task Directory"}, now),
		}}
		sa.tasks = append(sa.tasks, t.Name)
		sa.logs[t.Name] = newTaskLogs()
	}
	s.allocs[a.ID] = sa
	s.allocOrder = append(s.allocOrder, a.ID)
	if s.cfg.RunDelay == 0 {
		s.startAllocLocked(sa)
		return
	}
	id := a.ID
	sa.start = time.AfterFunc(s.cfg.RunDelay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if sa := s.allocs[id]; sa != nil && !s.closed {
			s.startAllocLocked(sa)
		}
	})
}

func taskEvent(typ, display string, details map[string]string, now time.Time) *api.TaskEvent {
	if details == nil {
		details = map[string]string{}
	}
	msg := ""
	if typ == "Task Setup" {
		msg = display
	}
	return &api.TaskEvent{Type: typ, Time: now.UnixNano(), DisplayMessage: display, Details: details, Message: msg}
}

func copyJob(j *api.Job) *api.Job {
	var out api.Job
	if b, err := json.Marshal(j); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return &out
}
