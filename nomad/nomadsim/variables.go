package nomadsim

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Variables live in the "default" namespace, unencrypted, with Nomad's
// check-and-set semantics (?cas=N): a stale or wrong index is a 409 whose
// body is the current variable (var-*-conflict.json).

var validVarPath = regexp.MustCompile(`^[a-zA-Z0-9-_~/]{1,128}$`)

const errVarReserved = `only paths at "nomad/jobs" or "nomad/job-templates" and below are valid paths under the top-level "nomad" directory`

// varPathError returns the agent's error for a path it refuses, or "".
func varPathError(p string) string {
	switch {
	case !validVarPath.MatchString(p):
		return fmt.Sprintf("invalid path %q", p)
	case p == "nomad" || strings.HasPrefix(p, "nomad/"):
		if p == "nomad/jobs" || strings.HasPrefix(p, "nomad/jobs/") ||
			p == "nomad/job-templates" || strings.HasPrefix(p, "nomad/job-templates/") {
			return ""
		}
		return errVarReserved
	}
	return ""
}

func varMeta(v *api.Variable) *api.VariableMetadata {
	return &api.VariableMetadata{
		Namespace: v.Namespace, Path: v.Path, CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex,
		CreateTime: v.CreateTime, ModifyTime: v.ModifyTime,
	}
}

// handleVars serves GET /v1/vars (?prefix=): metadata sorted by path.
func (s *Server) handleVars(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	s.mu.Lock()
	out := []any{}
	for _, p := range sortedKeys(s.vars) {
		if strings.HasPrefix(p, prefix) {
			out = append(out, toWire(varMeta(s.vars[p])))
		}
	}
	index := s.index
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, metaRead, index, out)
}

// handleVar serves GET, PUT and DELETE /v1/var/<path> (?cas=N on writes).
func (s *Server) handleVar(w http.ResponseWriter, r *http.Request) {
	p := pathTail(r, "/v1/var/")
	cas, hasCAS := uint64(0), r.URL.Query().Has("cas")
	if hasCAS {
		var err error
		if cas, err = strconv.ParseUint(r.URL.Query().Get("cas"), 10, 64); err != nil {
			writeError(w, r, http.StatusBadRequest, fmt.Sprintf("failed to parse cas value: %v", err))
			return
		}
	}
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		v, index := s.vars[p], s.index
		s.mu.Unlock()
		if v == nil {
			writeErrorMeta(w, r, metaRead, index, http.StatusNotFound, "variable not found")
			return
		}
		writeJSON(w, http.StatusOK, metaRead, index, toWire(v))
	case http.MethodPut, http.MethodPost:
		var in api.Variable
		if !decodeBody(w, r, &in) {
			return
		}
		if msg := varPathError(p); msg != "" {
			writeErrorMeta(w, r, metaWrite, 0, http.StatusInternalServerError, msg)
			return
		}
		if len(in.Items) == 0 {
			writeErrorMeta(w, r, metaWrite, 0, http.StatusInternalServerError, "empty variables are invalid")
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		cur := s.vars[p]
		if conflict := s.casConflictLocked(cur, p, cas, hasCAS); conflict != nil {
			writeConflict(w, r, s.index, conflict)
			return
		}
		now := time.Now().UnixNano()
		index := s.nextIndexLocked()
		v := &api.Variable{Namespace: api.DefaultNamespace, Path: p, Items: in.Items, ModifyIndex: index, ModifyTime: now}
		if cur != nil {
			v.CreateIndex, v.CreateTime = cur.CreateIndex, cur.CreateTime
		} else {
			v.CreateIndex, v.CreateTime = index, now
		}
		s.vars[p] = v
		writeJSON(w, http.StatusOK, metaWrite, index, toWire(v))
	case http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		cur := s.vars[p]
		if conflict := s.casConflictLocked(cur, p, cas, hasCAS); conflict != nil {
			writeConflict(w, r, s.index, conflict)
			return
		}
		index := s.index
		if cur != nil {
			index = s.nextIndexLocked()
			delete(s.vars, p)
		}
		setMeta(w, metaWrite, index)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, r, http.StatusMethodNotAllowed, errInvalidMethod)
	}
}

// casConflictLocked returns the body of a 409 when a check-and-set index
// does not match, or nil. cas=0 means "must not exist".
func (s *Server) casConflictLocked(cur *api.Variable, p string, cas uint64, hasCAS bool) any {
	switch {
	case !hasCAS:
		return nil
	case cur == nil && cas == 0:
		return nil
	case cur == nil:
		return toWire(&api.Variable{Namespace: api.DefaultNamespace, Path: p})
	case cur.ModifyIndex != cas:
		return toWire(cur)
	}
	return nil
}
