package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Nomad's texts for register requests the HTTP layer rejects with 400.
const (
	errJobMissing   = "Job must be specified"
	errJobIDMissing = "Job ID hasn't been provided"
	errJobIDPath    = "Job ID does not match name"
	errJobNotFound  = "job not found"
	errEvalNotFound = "eval not found"
)

// handleJobs serves GET /v1/jobs (?prefix=) and PUT|POST /v1/jobs (register).
func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		prefix := r.URL.Query().Get("prefix")
		s.mu.Lock()
		ids := make([]string, 0, len(s.jobs))
		for id := range s.jobs {
			if strings.HasPrefix(id, prefix) {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		out := []any{}
		for _, id := range ids {
			out = append(out, s.jobStubWireLocked(s.jobs[id]))
		}
		index := s.index
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, metaRead, index, out)
	case http.MethodPut, http.MethodPost:
		s.handleRegister(w, r, "")
	default:
		writeError(w, r, http.StatusMethodNotAllowed, errInvalidMethod)
	}
}

// handleJob serves /v1/job/<id>[/allocations|/evaluations|/summary].
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	tail := pathTail(r, "/v1/job/")
	id, sub := tail, ""
	for _, suffix := range []string{"/allocations", "/evaluations", "/summary"} {
		if strings.HasSuffix(tail, suffix) {
			id, sub = strings.TrimSuffix(tail, suffix), suffix[1:]
			break
		}
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		sj, index := s.jobs[id], s.index
		var body obj
		if sj != nil {
			body = jobWire(sj.job)
		}
		s.mu.Unlock()
		if sj == nil {
			writeErrorMeta(w, r, metaRead, index, http.StatusNotFound, errJobNotFound)
			return
		}
		writeJSON(w, http.StatusOK, metaRead, index, body)
	case sub == "" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		s.handleRegister(w, r, id)
	case sub == "" && r.Method == http.MethodDelete:
		s.handleDeregister(w, r, id)
	case sub == "allocations" && r.Method == http.MethodGet:
		s.mu.Lock()
		out := []any{}
		for _, aid := range sortedKeys(s.allocs) {
			if a := s.allocs[aid]; a.a.JobID == id {
				out = append(out, allocStubWire(a.a))
			}
		}
		index := s.index
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, metaRead, index, out)
	case sub == "evaluations" && r.Method == http.MethodGet:
		s.mu.Lock()
		out := []any{}
		for _, eid := range sortedKeys(s.evals) {
			if e := s.evals[eid]; e.JobID == id {
				out = append(out, evalWire(e))
			}
		}
		index := s.index
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, metaRead, index, out)
	case sub == "summary" && r.Method == http.MethodGet:
		s.mu.Lock()
		sj, index := s.jobs[id], s.index
		var sum *api.JobSummary
		if sj != nil {
			sum = s.jobSummaryLocked(sj)
		}
		s.mu.Unlock()
		if sj == nil {
			writeErrorMeta(w, r, metaRead, index, http.StatusNotFound, errJobNotFound)
			return
		}
		writeJSON(w, http.StatusOK, metaRead, index, toWire(sum))
	default:
		writeError(w, r, http.StatusMethodNotAllowed, errInvalidMethod)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseJob decodes a register or validate body and canonicalizes its job as
// the agent does. A non-empty message means a 400 with that text.
func parseJob(r *http.Request, pathID string) (*api.JobRegisterRequest, string) {
	var req api.JobRegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, err.Error()
	}
	if req.Job == nil {
		return nil, errJobMissing
	}
	if req.Job.ID == nil {
		return nil, errJobIDMissing
	}
	if pathID != "" && *req.Job.ID != pathID {
		return nil, errJobIDPath
	}
	return &req, ""
}

// canonicalize fills defaults like the agent: the api's Canonicalize, then
// the server's own ("*" datacenters, default node pool). It reports false
// for a job the api cannot canonicalize (null groups or tasks).
func canonicalize(j *api.Job) (ok bool) {
	for _, tg := range j.TaskGroups {
		if tg == nil {
			return false
		}
		for _, t := range tg.Tasks {
			if t == nil {
				return false
			}
		}
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	j.Canonicalize()
	if len(j.Datacenters) == 0 {
		j.Datacenters = []string{"*"}
	}
	if j.NodePool == nil || *j.NodePool == "" {
		j.NodePool = new("default")
	}
	return true
}

// handleRegister serves PUT|POST /v1/jobs and POST /v1/job/<id>.
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request, pathID string) {
	req, msg := parseJob(r, pathID)
	if msg != "" {
		writeError(w, r, http.StatusBadRequest, msg)
		return
	}
	job := req.Job
	spec := jobSpecKey(job)
	if !canonicalize(job) {
		writeError(w, r, http.StatusBadRequest, "invalid job: null task group or task")
		return
	}
	if errs := validateJob(job); len(errs) > 0 {
		writeError(w, r, http.StatusInternalServerError, multiError(errs))
		return
	}
	s.mu.Lock()
	resp, index, err := s.registerLocked(job, spec, req.EnforceIndex, req.JobModifyIndex)
	s.mu.Unlock()
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, metaWrite, index, writeResponse(resp, index))
}

// handleValidate serves PUT|POST /v1/validate/job: 200 with the validation
// errors in the body (error-validate-no-task-groups.json).
func (s *Server) handleValidate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		writeError(w, r, http.StatusMethodNotAllowed, errInvalidMethod)
		return
	}
	req, msg := parseJob(r, "")
	if msg != "" {
		writeError(w, r, http.StatusBadRequest, msg)
		return
	}
	resp := &api.JobValidateResponse{DriverConfigValidated: true}
	if !canonicalize(req.Job) {
		resp.ValidationErrors = []string{"invalid job: null task group or task"}
	} else {
		resp.ValidationErrors = validateJob(req.Job)
	}
	if len(resp.ValidationErrors) > 0 {
		resp.Error = multiError(resp.ValidationErrors)
	}
	writeJSON(w, http.StatusOK, metaNone, 0, toWire(resp))
}

// jobSpecKey is the submitted job without the fields the server owns, for
// telling an identical re-register (a no-op) from an update.
func jobSpecKey(j *api.Job) string {
	c := *j
	c.Status, c.StatusDescription, c.Stable, c.Version = nil, nil, nil, nil
	c.SubmitTime, c.CreateIndex, c.ModifyIndex, c.JobModifyIndex = nil, nil, nil, nil
	b, _ := json.Marshal(&c)
	return string(b)
}

// registerLocked stores the job and runs its evaluation. Re-registering an
// identical job creates a complete evaluation and changes nothing else; a
// changed job gets a new version and its old allocations are replaced.
func (s *Server) registerLocked(job *api.Job, spec string, enforce bool, jmi uint64) (*api.JobRegisterResponse, uint64, error) {
	id := *job.ID
	existing := s.jobs[id]
	if enforce {
		const prefix = "Enforcing job modify index"
		switch {
		case existing == nil && jmi != 0:
			return nil, 0, fmt.Errorf("%s %d: job does not exist", prefix, jmi)
		case existing != nil && jmi == 0:
			return nil, 0, fmt.Errorf("%s %d: job already exists", prefix, jmi)
		case existing != nil && *existing.job.JobModifyIndex != jmi:
			return nil, 0, fmt.Errorf("%s %d: job exists with conflicting job modify index: %d", prefix, jmi, *existing.job.JobModifyIndex)
		}
	}
	now := time.Now()
	index := s.nextIndexLocked()
	if existing != nil && existing.spec == spec {
		e := s.newEvalLocked(existing.job, triggerRegister, index, now)
		e.DeploymentID = existing.deploymentID
		e.QueuedAllocations = map[string]int{}
		for _, tg := range existing.job.TaskGroups {
			e.QueuedAllocations[*tg.Name] = 0
		}
		e.Status = evalComplete
		return &api.JobRegisterResponse{EvalID: e.ID, EvalCreateIndex: index, JobModifyIndex: *existing.job.JobModifyIndex}, index, nil
	}
	version, createIndex := uint64(0), index
	if existing != nil {
		version, createIndex = *existing.job.Version+1, *existing.job.CreateIndex
	}
	job.Status, job.StatusDescription, job.Stable = new("pending"), new(""), new(false)
	job.Version, job.SubmitTime = new(version), new(now.UnixNano())
	job.CreateIndex, job.ModifyIndex, job.JobModifyIndex = new(createIndex), new(index), new(index)
	sj := &simJob{job: job, spec: spec}
	if *job.Type == api.JobTypeService {
		sj.deploymentID = newUUID()
	}
	s.jobs[id] = sj
	e := s.newEvalLocked(job, triggerRegister, index, now)
	e.DeploymentID = sj.deploymentID
	if existing != nil {
		s.cancelBlockedLocked(existing, e.ID)
		for _, sa := range s.liveJobAllocsLocked(id) {
			s.stopAllocLocked(sa, descNotNeeded)
		}
	}
	s.scheduleLocked(sj, e, now)
	return &api.JobRegisterResponse{EvalID: e.ID, EvalCreateIndex: index, JobModifyIndex: index}, index, nil
}

func (s *Server) liveJobAllocsLocked(jobID string) []*simAlloc {
	var out []*simAlloc
	for _, id := range s.allocOrder {
		if a := s.allocs[id]; a.a.JobID == jobID && !allocTerminal(a.a) {
			out = append(out, a)
		}
	}
	return out
}

// cancelBlockedLocked cancels the job's blocked evaluation, naming the
// evaluation that superseded it (docker-evaluation-blocked-after-purge.json).
func (s *Server) cancelBlockedLocked(sj *simJob, byEval string) {
	if sj.blocked == "" {
		return
	}
	if e := s.evals[sj.blocked]; e != nil {
		e.Status = evalCanceled
		e.StatusDescription = fmt.Sprintf("evaluation %q successful", byEval)
		e.ModifyIndex = s.nextIndexLocked()
		e.ModifyTime = time.Now().UnixNano()
	}
	sj.blocked = ""
}

// handleDeregister serves DELETE /v1/job/<id>[?purge=true]: the job's
// allocations stop (and stay readable); purge removes the job at once. An
// unknown job is a 200 with an empty EvalID.
func (s *Server) handleDeregister(w http.ResponseWriter, r *http.Request, id string) {
	purge, _ := strconv.ParseBool(r.URL.Query().Get("purge"))
	s.mu.Lock()
	resp, index := s.deregisterLocked(id, purge)
	s.mu.Unlock()
	o := writeResponse(resp, index)
	o["VolumeEvalID"], o["VolumeEvalIndex"] = "", 0
	writeJSON(w, http.StatusOK, metaWrite, index, o)
}

func (s *Server) deregisterLocked(id string, purge bool) (*api.JobDeregisterResponse, uint64) {
	sj := s.jobs[id]
	if sj == nil {
		return &api.JobDeregisterResponse{}, 0
	}
	now := time.Now()
	index := s.nextIndexLocked()
	e := s.newEvalLocked(sj.job, triggerDeregister, index, now)
	e.JobModifyIndex = index
	for _, sa := range s.liveJobAllocsLocked(id) {
		s.stopAllocLocked(sa, descNotNeeded)
	}
	s.cancelBlockedLocked(sj, e.ID)
	e.Status, e.ModifyIndex, e.ModifyTime = evalComplete, s.index, time.Now().UnixNano()
	if purge {
		delete(s.jobs, id)
	} else if !*sj.job.Stop {
		sj.job.Stop = new(true)
		sj.job.Version = new(*sj.job.Version + 1)
		sj.job.JobModifyIndex, sj.job.ModifyIndex = new(index), new(index)
		sj.spec = jobSpecKey(sj.job)
		s.refreshJobStatusLocked(sj)
	}
	return &api.JobDeregisterResponse{EvalID: e.ID, EvalCreateIndex: index, JobModifyIndex: index}, index
}

// jobWire is the server's encoding of a job (docker-job.json).
func jobWire(j *api.Job) obj {
	o := toObj(j)
	fixJobWire(o)
	return o
}

// fixJobWire drops the fields a v1.6.5 server does not have (newer api
// fields are silently dropped by it, README surprise 4) and adds the
// server-only ones (token fields, always empty on reads).
func fixJobWire(o obj) {
	dropKeys(o, "Migrate", "Reschedule", "UI", "VersionTag")
	o["ConsulToken"], o["VaultToken"] = "", ""
	groups, _ := o["TaskGroups"].([]any)
	for _, g := range groups {
		tg, ok := g.(obj)
		if !ok {
			continue
		}
		dropKeys(tg, "Disconnect", "MaxRunDuration", "PreventRescheduleOnLost")
		tasks, _ := tg["Tasks"].([]any)
		for _, tv := range tasks {
			task, ok := tv.(obj)
			if !ok {
				continue
			}
			dropKeys(task, "Actions", "Consul", "Identities", "Schedule", "Secrets")
			task["CSIPluginConfig"] = nil
			if res, ok := task["Resources"].(obj); ok {
				dropNewResourceKeys(res)
			}
			// v1.6.5 has no LogConfig.Enabled and defaults Disabled to
			// false (real-docker-job-running.json).
			if lc, ok := task["LogConfig"].(obj); ok {
				dropKeys(lc, "Enabled")
				if lc["Disabled"] == nil {
					lc["Disabled"] = false
				}
			}
			if id, ok := task["Identity"].(obj); ok {
				task["Identity"] = obj{"Env": id["Env"], "File": id["File"]}
			}
		}
	}
}

// dropNewResourceKeys drops the Resources fields newer than v1.6.5, which
// the server neither keeps nor sends (real-docker-allocation-running.json).
func dropNewResourceKeys(res obj) { dropKeys(res, "NUMA", "SecretsMB") }

// jobStubWireLocked is a jobs list entry (jobs-list.json).
func (s *Server) jobStubWireLocked(sj *simJob) obj {
	j := sj.job
	stub := &api.JobListStub{
		ID: *j.ID, ParentID: deref(j.ParentID), Name: *j.Name, Namespace: *j.Namespace,
		Datacenters: j.Datacenters, Type: *j.Type, Priority: *j.Priority, Periodic: j.Periodic != nil,
		ParameterizedJob: j.ParameterizedJob != nil, Stop: *j.Stop, Status: *j.Status,
		StatusDescription: deref(j.StatusDescription), JobSummary: s.jobSummaryLocked(sj),
		CreateIndex: *j.CreateIndex, ModifyIndex: *j.ModifyIndex, JobModifyIndex: *j.JobModifyIndex,
		SubmitTime: *j.SubmitTime,
	}
	o := toObj(stub)
	o["Multiregion"], o["Namespace"], o["NodePool"] = nil, *j.Namespace, deref(j.NodePool)
	return o
}

// jobSummaryLocked counts the job's allocations per group by client status;
// Queued is what its blocked evaluation still waits to place.
func (s *Server) jobSummaryLocked(sj *simJob) *api.JobSummary {
	sum := &api.JobSummary{
		JobID: *sj.job.ID, Namespace: *sj.job.Namespace, Summary: map[string]api.TaskGroupSummary{},
		Children: &api.JobChildrenSummary{}, CreateIndex: *sj.job.CreateIndex, ModifyIndex: s.index,
	}
	var blocked *api.Evaluation
	if sj.blocked != "" {
		blocked = s.evals[sj.blocked]
	}
	for _, tg := range sj.job.TaskGroups {
		var g api.TaskGroupSummary
		if blocked != nil {
			if m := blocked.FailedTGAllocs[*tg.Name]; m != nil {
				g.Queued = m.CoalescedFailures + 1
			}
		}
		for _, a := range s.allocs {
			if a.a.JobID != *sj.job.ID || a.a.TaskGroup != *tg.Name || a.a.CreateIndex < *sj.job.CreateIndex {
				continue
			}
			switch a.a.ClientStatus {
			case api.AllocClientStatusPending:
				g.Starting++
			case api.AllocClientStatusRunning:
				g.Running++
			case api.AllocClientStatusComplete:
				g.Complete++
			case api.AllocClientStatusFailed:
				g.Failed++
			case api.AllocClientStatusLost:
				g.Lost++
			default:
				g.Unknown++
			}
		}
		sum.Summary[*tg.Name] = g
	}
	return sum
}

// Jobs returns the IDs of the registered (not purged) jobs, sorted.
func (s *Server) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.jobs)
}
