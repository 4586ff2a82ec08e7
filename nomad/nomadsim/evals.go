package nomadsim

import (
	"net/http"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// evalWire is the server's encoding of an evaluation: every empty field is
// omitted (docker-evaluation-placement-failed.json has no StatusDescription,
// docker-evaluation-blocked.json no BlockedEval), and a failed group's
// metric has no NodePool (a field newer than v1.6.5).
func evalWire(e *api.Evaluation) obj {
	o := toObj(e)
	for k, v := range o {
		if isEmptyJSON(v) {
			delete(o, k)
		}
	}
	if failed, ok := o["FailedTGAllocs"].(obj); ok {
		for _, m := range failed {
			if mo, ok := m.(obj); ok {
				dropKeys(mo, "NodePool")
			}
		}
	}
	return o
}

// evalStubWire is a RelatedEvals entry (docker-evaluation-related.json):
// all fields present, WaitUntil null.
func evalStubWire(e *api.Evaluation) obj {
	o := toObj(&api.EvaluationStub{
		ID: e.ID, Priority: e.Priority, Type: e.Type, TriggeredBy: e.TriggeredBy,
		Namespace: e.Namespace, JobID: e.JobID, NodeID: e.NodeID, DeploymentID: e.DeploymentID,
		Status: e.Status, StatusDescription: e.StatusDescription, NextEval: e.NextEval,
		PreviousEval: e.PreviousEval, BlockedEval: e.BlockedEval, CreateIndex: e.CreateIndex,
		ModifyIndex: e.ModifyIndex, CreateTime: e.CreateTime, ModifyTime: e.ModifyTime,
	})
	o["WaitUntil"] = nil
	return o
}

// relatedEvalsLocked follows the Previous/Next/Blocked links from e.
func (s *Server) relatedEvalsLocked(e *api.Evaluation) []any {
	seen := map[string]bool{e.ID: true}
	queue := []*api.Evaluation{e}
	out := []any{}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, id := range []string{cur.PreviousEval, cur.NextEval, cur.BlockedEval} {
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			if rel := s.evals[id]; rel != nil {
				out = append(out, evalStubWire(rel))
				queue = append(queue, rel)
			}
		}
	}
	return out
}

// handleEvaluations serves GET /v1/evaluations (?prefix=, ?job=).
func (s *Server) handleEvaluations(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	job := r.URL.Query().Get("job")
	s.mu.Lock()
	out := []any{}
	for _, id := range sortedKeys(s.evals) {
		e := s.evals[id]
		if strings.HasPrefix(id, prefix) && (job == "" || e.JobID == job) {
			out = append(out, evalWire(e))
		}
	}
	index := s.index
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, metaRead, index, out)
}

// handleEvaluation serves GET /v1/evaluation/<id> (?related=true); 404
// "eval not found".
func (s *Server) handleEvaluation(w http.ResponseWriter, r *http.Request) {
	id := pathTail(r, "/v1/evaluation/")
	related := r.URL.Query().Get("related") == "true"
	s.mu.Lock()
	e, index := s.evals[id], s.index
	var body obj
	if e != nil {
		body = evalWire(e)
		if related {
			body["RelatedEvals"] = s.relatedEvalsLocked(e)
		}
	}
	s.mu.Unlock()
	if e == nil {
		writeErrorMeta(w, r, metaRead, index, http.StatusNotFound, errEvalNotFound)
		return
	}
	writeJSON(w, http.StatusOK, metaRead, index, body)
}
