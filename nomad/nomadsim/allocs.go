package nomadsim

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// simAlloc is one allocation and its simulated tasks. The allocation fields
// are guarded by Server.mu; logs have their own locks.
type simAlloc struct {
	a      *api.Allocation
	tasks  []string // task names in group order
	logs   map[string]*taskLogs
	ctx    context.Context // cancelled when the allocation stops: kills its commands
	cancel context.CancelFunc
	start  *time.Timer
	// orphaned: lost while its node was down; the node's client stops its
	// tasks when it is back (nodeBackLocked).
	orphaned bool
	// dropped: its node went down, which ends its exec streams with close
	// 1000 and no exit code (real-lost-exec-in-flight.json).
	dropped bool
	// cfs is the task's container filesystem (containerfs.go).
	cfs    *containerFS
	fsOnce sync.Once
}

// simSigningKeyID is the (fake) keyring key every allocation is signed with.
const simSigningKeyID = "00000000-5115-4e5c-a1de-000000000001"

// taskStartedLine is the first stdout line of every simulated task.
const taskStartedLine = "sandgate nomadsim: task started (simulated: commands are not executed)\n"

// shutdown stops the allocation's timer, kills its commands and ends its
// log files. Callers hold Server.mu.
func (sa *simAlloc) shutdown() {
	if sa.start != nil {
		sa.start.Stop()
	}
	sa.cancel()
	for _, l := range sa.logs {
		l.stdout.finish()
		l.stderr.finish()
	}
}

// startAllocLocked moves a pending allocation to running, or to failed when
// the client would refuse a task's driver config (failStartLocked).
func (s *Server) startAllocLocked(sa *simAlloc) {
	a := sa.a
	if a.ClientStatus != api.AllocClientStatusPending || allocTerminal(a) {
		return
	}
	now := time.Now()
	index := s.nextIndexLocked()
	if refused := refusedTasks(a); len(refused) > 0 {
		s.failStartLocked(sa, refused, now, index)
		return
	}
	a.ClientStatus = api.AllocClientStatusRunning
	a.ClientDescription = "Tasks are running"
	for _, name := range sa.tasks {
		ts := a.TaskStates[name]
		ts.State = "running"
		ts.StartedAt = now.UTC()
		ts.Events = append(ts.Events, taskEvent("Started", "Task started by client", nil, now))
		if !s.cfg.QuietTasks {
			sa.logs[name].stdout.append([]byte(taskStartedLine))
		}
	}
	a.ModifyIndex, a.ModifyTime = index, now.UnixNano()
	if sj := s.jobs[a.JobID]; sj != nil {
		s.refreshJobStatusLocked(sj)
	}
}

// refusedTasks maps each task of a's group whose driver config the client
// refuses at start to the validation error it reports.
func refusedTasks(a *api.Allocation) map[string]string {
	refused := map[string]string{}
	if tg := allocGroup(a); tg != nil {
		for _, t := range tg.Tasks {
			if msg := driverConfigError(t); msg != "" {
				refused[t.Name] = msg
			}
		}
	}
	return refused
}

// allocGroup is a's task group in the allocation's job, or nil.
func allocGroup(a *api.Allocation) *api.TaskGroup {
	if a.Job == nil {
		return nil
	}
	for _, tg := range a.Job.TaskGroups {
		if tg != nil && deref(tg.Name) == a.TaskGroup {
			return tg
		}
	}
	return nil
}

// Restart reasons of Nomad's client restart tracker.
const (
	reasonNoRestartsAllowed = "Policy allows no restarts"
	reasonUnrecoverable     = "Error was unrecoverable"
)

// failStartLocked fails an allocation whose tasks the client refused at
// start, as a v1.6.5 client with Docker did for a ulimit or labels object:
// each refused task gets a "Failed Validation" event carrying the error, then
// "Not Restarting" (FailsTask) and ends dead and Failed, never started; the
// allocation is ClientStatus failed ("Failed tasks") while DesiredStatus
// stays run, and nothing is rescheduled. The recorded job had no restarts
// ("Policy allows no restarts"); with restart attempts the tracker gives up
// at once on an unrecoverable start error, which a parse error is (taken from
// Nomad's source, not recorded). Other tasks of the group end dead without
// starting (a real client would start and then kill them).
func (s *Server) failStartLocked(sa *simAlloc, refused map[string]string, now time.Time, index uint64) {
	a := sa.a
	a.ClientStatus = api.AllocClientStatusFailed
	a.ClientDescription = "Failed tasks"
	for _, name := range sa.tasks {
		ts := a.TaskStates[name]
		ts.State = "dead"
		ts.FinishedAt = now.UTC()
		msg, ok := refused[name]
		if !ok {
			continue
		}
		reason := reasonUnrecoverable
		if restartAttempts(a, name) == 0 {
			reason = reasonNoRestartsAllowed
		}
		ts.Failed = true
		ts.Events = append(ts.Events,
			&api.TaskEvent{
				Type: "Failed Validation", Time: now.UnixNano(), DisplayMessage: msg,
				Details: map[string]string{"validation_error": msg}, ValidationError: msg,
			},
			&api.TaskEvent{
				Type: "Not Restarting", Time: now.UnixNano(), DisplayMessage: reason,
				Details:   map[string]string{"restart_reason": reason, "fails_task": "true"},
				FailsTask: true, RestartReason: reason,
			})
	}
	a.ModifyIndex, a.ModifyTime = index, now.UnixNano()
	sa.shutdown()
	if n := s.nodeByIDLocked(a.NodeID); n != nil && n.n.DrainStrategy != nil && s.liveAllocsOnNodeLocked(a.NodeID) == 0 {
		s.completeDrainLocked(n)
	}
	if sj := s.jobs[a.JobID]; sj != nil {
		s.refreshJobStatusLocked(sj)
	}
}

// restartAttempts is the restart policy's Attempts for task name of a: the
// task's when it sets Attempts (the server merges it over the group's), else
// the group's.
func restartAttempts(a *api.Allocation, name string) int {
	if t := allocTask(a, name); t != nil && t.RestartPolicy != nil && t.RestartPolicy.Attempts != nil {
		return *t.RestartPolicy.Attempts
	}
	if tg := allocGroup(a); tg != nil && tg.RestartPolicy != nil {
		return deref(tg.RestartPolicy.Attempts)
	}
	return 0
}

// stopAllocLocked stops an allocation as the client would after the server
// set DesiredStatus stop: tasks killed, ClientStatus complete. Its commands
// are killed and its logs end.
func (s *Server) stopAllocLocked(sa *simAlloc, desc string) {
	s.endAllocLocked(sa, api.AllocClientStatusComplete, "All tasks have completed", desc)
}

// nodeLostLocked is the server's reaction to a node that missed its
// heartbeats (real-lost-*.json): its live allocations become lost
// (DesiredStatus stop, DesiredDescription descLost, ClientStatus lost) while
// what the client last reported stays (ClientDescription, task states and
// events: the client is gone and reports nothing more). Their commands and
// followed log streams end; their exec streams end with close 1000 and no
// exit code. Then a node-update evaluation of each
// job places the replacements, whatever the reschedule policy (Nomad always
// replaces lost allocations); with no other feasible node it is complete with
// FailedTGAllocs and a blocked evaluation, and the job is pending.
func (s *Server) nodeLostLocked(n *simNode) {
	now := time.Now()
	var jobs []string
	for _, id := range s.allocOrder {
		sa := s.allocs[id]
		a := sa.a
		if a.NodeID != n.n.ID || allocTerminal(a) {
			continue
		}
		index := s.nextIndexLocked()
		a.DesiredStatus, a.DesiredDescription = api.AllocDesiredStatusStop, descLost
		a.ClientStatus = api.AllocClientStatusLost
		a.ModifyIndex, a.AllocModifyIndex, a.ModifyTime = index, index, now.UnixNano()
		sa.orphaned, sa.dropped = true, true
		sa.shutdown()
		if !slices.Contains(jobs, a.JobID) {
			jobs = append(jobs, a.JobID)
		}
	}
	if n.n.DrainStrategy != nil && len(jobs) > 0 {
		s.completeDrainLocked(n) // nothing is left to drain
	}
	for _, jobID := range jobs {
		sj := s.jobs[jobID]
		if sj == nil {
			continue // purged
		}
		eval := s.newEvalLocked(sj.job, triggerNodeUpdate, s.nextIndexLocked(), now)
		eval.NodeID, eval.NodeModifyIndex = n.n.ID, n.n.ModifyIndex
		s.scheduleLocked(sj, eval, now)
	}
}

// nodeBackLocked is the client of a node that was down registering again:
// it stops the tasks of the allocations the server marked lost meanwhile
// (Killing, Terminated, Killed; ClientStatus complete, "All tasks have
// completed"; DesiredDescription stays descLost), as
// real-lost-allocation-after-restart.json shows. It does not link them to
// their replacements (no NextAllocation, no PreviousAllocation), as Nomad
// did not.
func (s *Server) nodeBackLocked(n *simNode) {
	now := time.Now()
	for _, id := range s.allocOrder {
		sa := s.allocs[id]
		if sa.a.NodeID != n.n.ID || !sa.orphaned {
			continue
		}
		sa.orphaned = false
		a := sa.a
		index := s.nextIndexLocked()
		wasRunning := false
		for _, ts := range a.TaskStates {
			wasRunning = wasRunning || ts.State == "running"
		}
		a.ClientStatus, a.ClientDescription = api.AllocClientStatusComplete, "All tasks have completed"
		s.killTasksLocked(sa, wasRunning, now)
		a.ModifyIndex, a.AllocModifyIndex, a.ModifyTime = index, index, now.UnixNano()
		if sj := s.jobs[a.JobID]; sj != nil {
			s.refreshJobStatusLocked(sj)
		}
	}
}

func (s *Server) endAllocLocked(sa *simAlloc, clientStatus, clientDesc, desiredDesc string) {
	a := sa.a
	if allocTerminal(a) {
		return
	}
	now := time.Now()
	index := s.nextIndexLocked()
	wasRunning := a.ClientStatus == api.AllocClientStatusRunning
	a.DesiredStatus = api.AllocDesiredStatusStop
	a.DesiredDescription = desiredDesc
	a.ClientStatus = clientStatus
	a.ClientDescription = clientDesc
	s.killTasksLocked(sa, wasRunning, now)
	a.ModifyIndex, a.AllocModifyIndex, a.ModifyTime = index, index, now.UnixNano()
	sa.shutdown()
	if n := s.nodeByIDLocked(a.NodeID); n != nil && n.n.DrainStrategy != nil && s.liveAllocsOnNodeLocked(a.NodeID) == 0 {
		s.completeDrainLocked(n)
	}
	if sj := s.jobs[a.JobID]; sj != nil {
		s.refreshJobStatusLocked(sj)
	}
}

// killTasksLocked marks the allocation's tasks dead; tasks that ran get the
// client's kill events: Killing with the task's kill_timeout, Terminated
// with what the driver reports for a task stopped by its signal (docker: the
// container's 143 with the driver's exit message, real-docker-allocation-
// after-purge.json; raw_exec and others: SIGINT, 130,
// rawexec-allocation-after-purge.json), then Killed.
func (s *Server) killTasksLocked(sa *simAlloc, wasRunning bool, now time.Time) {
	for _, name := range sa.tasks {
		ts := sa.a.TaskStates[name]
		ts.State = "dead"
		ts.FinishedAt = now.UTC()
		if !wasRunning {
			continue
		}
		task := allocTask(sa.a, name)
		kill := 5 * time.Second
		if task != nil && task.KillTimeout != nil && *task.KillTimeout > 0 {
			kill = *task.KillTimeout
		}
		terminated := &api.TaskEvent{
			Type: "Terminated", Time: now.UnixNano(), DisplayMessage: "Exit Code: 130, Signal: 2", ExitCode: 130, Signal: 2,
			Details: map[string]string{"exit_code": "130", "signal": "2", "oom_killed": "false"},
		}
		if task != nil && task.Driver == "docker" {
			const msg = "Docker container exited with non-zero exit code: 143"
			terminated = &api.TaskEvent{
				Type: "Terminated", Time: now.UnixNano(), DisplayMessage: "Exit Code: 143, Exit Message: " + strconv.Quote(msg),
				ExitCode: 143, Message: msg,
				Details: map[string]string{"exit_code": "143", "signal": "0", "oom_killed": "false", "exit_message": msg},
			}
		}
		ts.Events = append(ts.Events,
			&api.TaskEvent{
				Type: "Killing", Time: now.UnixNano(), DisplayMessage: fmt.Sprintf("Sent interrupt. Waiting %s before force killing", kill),
				Details: map[string]string{"kill_timeout": kill.String()}, KillTimeout: kill,
			},
			terminated,
			taskEvent("Killed", "Task successfully killed", nil, now))
	}
}

// allocTask is task name of a's group in the allocation's job, or nil.
func allocTask(a *api.Allocation, name string) *api.Task {
	if tg := allocGroup(a); tg != nil {
		for _, t := range tg.Tasks {
			if t != nil && t.Name == name {
				return t
			}
		}
	}
	return nil
}

// allocWire is the server's encoding of a full allocation
// (rawexec-allocation.json, rawexec-allocation-after-purge.json).
func allocWire(a *api.Allocation) obj {
	o := toObj(a)
	if isNullStruct(o["DesiredTransition"]) {
		delete(o, "DesiredTransition")
	}
	dropEmpty(o, "DeploymentID", "DeploymentStatus", "DesiredDescription", "FollowupEvalID",
		"NextAllocation", "PreemptedAllocations", "PreemptedByAllocation", "PreviousAllocation",
		"RescheduleTracker", "Services")
	disk := int64(0)
	if a.AllocatedResources != nil {
		disk = a.AllocatedResources.Shared.DiskMB
	}
	o["SharedResources"] = obj{
		"CPU": 0, "Cores": 0, "Devices": nil, "DiskMB": disk, "IOPS": 0,
		"MemoryMB": 0, "MemoryMaxMB": 0, "Networks": nil,
	}
	o["SigningKeyID"] = simSigningKeyID
	if j, ok := o["Job"].(obj); ok {
		fixJobWire(j)
	}
	if res, ok := o["Resources"].(obj); ok {
		dropNewResourceKeys(res)
	}
	if trs, ok := o["TaskResources"].(obj); ok {
		for _, tr := range trs {
			if res, ok := tr.(obj); ok {
				dropNewResourceKeys(res)
			}
		}
	}
	// One entry per task: its lifecycle block, null without one
	// (rawexec-allocation.json, real-docker-allocation-running.json).
	if ar, ok := o["AllocatedResources"].(obj); ok {
		lifecycles := obj{}
		if tasks, ok := ar["Tasks"].(obj); ok {
			for name := range tasks {
				lifecycles[name] = nil
				if t := allocTask(a, name); t != nil && t.Lifecycle != nil {
					lifecycles[name] = toObj(t.Lifecycle)
				}
			}
		}
		ar["TaskLifecycles"] = lifecycles
	}
	if ns, ok := o["NetworkStatus"].(obj); ok {
		dropKeys(ns, "AddressIPv6")
	}
	if m, ok := o["Metrics"].(obj); ok {
		dropKeys(m, "NodePool")
	}
	fixTaskStatesWire(o)
	return o
}

// allocStubWire is the server's encoding of an allocation list entry
// (rawexec-job-allocations.json).
func allocStubWire(a *api.Allocation) obj {
	jobType, jobVersion := "", uint64(0)
	if a.Job != nil {
		jobType, jobVersion = deref(a.Job.Type), deref(a.Job.Version)
	}
	stub := &api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID,
		NodeName: a.NodeName, JobID: a.JobID, JobType: jobType, JobVersion: jobVersion,
		TaskGroup: a.TaskGroup, DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription, TaskStates: a.TaskStates,
		DeploymentStatus: a.DeploymentStatus, FollowupEvalID: a.FollowupEvalID,
		NextAllocation: a.NextAllocation, RescheduleTracker: a.RescheduleTracker,
		PreemptedAllocations: a.PreemptedAllocations, PreemptedByAllocation: a.PreemptedByAllocation,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
	o := toObj(stub)
	dt := toObj(a.DesiredTransition)
	dropKeys(dt, "MigrateDisablePlacement")
	o["DesiredTransition"] = dt
	fixTaskStatesWire(o)
	return o
}

// fixTaskStatesWire turns zero times into null and adds TaskHandle, as the
// server encodes a TaskState.
func fixTaskStatesWire(o obj) {
	states, _ := o["TaskStates"].(obj)
	for _, v := range states {
		ts, ok := v.(obj)
		if !ok {
			continue
		}
		for _, k := range []string{"LastRestart", "StartedAt", "FinishedAt"} {
			if t, _ := ts[k].(string); t == zeroTime {
				ts[k] = nil
			}
		}
		ts["TaskHandle"] = nil
		events, _ := ts["Events"].([]any)
		for _, e := range events {
			if eo, ok := e.(obj); ok {
				dropKeys(eo, "DiskSize")
			}
		}
	}
}

// handleAllocations serves GET /v1/allocations (?prefix=).
func (s *Server) handleAllocations(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	s.mu.Lock()
	ids := append([]string(nil), s.allocOrder...)
	sort.Strings(ids)
	out := []any{}
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			out = append(out, allocStubWire(s.allocs[id].a))
		}
	}
	index := s.index
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, metaRead, index, out)
}

// handleAllocation serves GET /v1/allocation/<id>; 404 "alloc not found".
func (s *Server) handleAllocation(w http.ResponseWriter, r *http.Request) {
	id := pathTail(r, "/v1/allocation/")
	s.mu.Lock()
	sa := s.allocs[id]
	index := s.index
	var body obj
	if sa != nil {
		body = allocWire(sa.a)
	}
	s.mu.Unlock()
	if sa == nil {
		writeErrorMeta(w, r, metaRead, index, http.StatusNotFound, "alloc not found")
		return
	}
	writeJSON(w, http.StatusOK, metaRead, index, body)
}

// errUnknownAlloc is the client endpoints' not-found text.
func errUnknownAlloc(id string) string { return "Unknown allocation " + strconv.Quote(id) }

// handleClientAllocation serves /v1/client/allocation/<id>/exec and /stats.
func (s *Server) handleClientAllocation(w http.ResponseWriter, r *http.Request) {
	id, sub, _ := strings.Cut(pathTail(r, "/v1/client/allocation/"), "/")
	switch {
	case sub == "exec" && r.Method == http.MethodGet:
		s.handleExec(w, r, id)
	case sub == "stats" && r.Method == http.MethodGet:
		s.handleAllocStats(w, r, id)
	default:
		writeError(w, r, http.StatusNotFound, errInvalidMethod)
	}
}

// handleAllocStats serves GET /v1/client/allocation/<id>/stats with zeroed
// usage (rawexec-allocation-stats.json's shape).
func (s *Server) handleAllocStats(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	sa := s.allocs[id]
	var tasks []string
	var unreachable bool
	if sa != nil {
		tasks = append(tasks, sa.tasks...)
		unreachable = s.nodeUnreachableLocked(sa.a.NodeID)
	}
	s.mu.Unlock()
	switch {
	case sa == nil:
		writeError(w, r, http.StatusNotFound, errUnknownAlloc(id))
		return
	case unreachable:
		writeError(w, r, http.StatusNotFound, errNoPathToNode) // as exec and logs (real-lost-*.json)
		return
	}
	now := time.Now().UnixNano()
	usage := func() *api.ResourceUsage {
		return &api.ResourceUsage{
			MemoryStats: &api.MemoryStats{Measured: []string{"RSS", "Swap"}},
			CpuStats:    &api.CpuStats{Measured: []string{"System Mode", "User Mode", "Percent"}},
			DeviceStats: []*api.DeviceGroupStats{},
		}
	}
	out := &api.AllocResourceUsage{ResourceUsage: usage(), Tasks: map[string]*api.TaskResourceUsage{}, Timestamp: now}
	for _, t := range tasks {
		out.Tasks[t] = &api.TaskResourceUsage{ResourceUsage: usage(), Timestamp: now, Pids: map[string]*api.ResourceUsage{}}
	}
	writeJSON(w, http.StatusOK, metaNone, 0, toWire(out))
}

func allocIndex(name string) int {
	i := strings.LastIndex(name, "[")
	if i < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	n, err := strconv.Atoi(name[i+1 : len(name)-1])
	if err != nil {
		return -1
	}
	return n
}
