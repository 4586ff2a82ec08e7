package gateway

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/audit"
	"sandgate/policies"
)

// recentCapacity is how many decisions GET /v1/decisions can show.
const recentCapacity = 500

// recentDecision is one decision as GET /v1/decisions shows it: the
// decision log's line plus the violations' messages.
type recentDecision struct {
	audit.Entry
	Violations []policies.Violation `json:"violations"`
}

// recentDecisions keeps the last decisions of this process in memory, for
// the dashboard; the decision log file is the durable record.
type recentDecisions struct {
	mu   sync.Mutex
	ring []recentDecision
	next int // where the next one goes
	full bool
}

func newRecentDecisions() *recentDecisions {
	return &recentDecisions{ring: make([]recentDecision, recentCapacity)}
}

// maxRecentViolations and maxViolationMsg bound what one decision keeps in
// memory: a violation's message can quote a request's values.
const (
	maxRecentViolations = 32
	maxViolationMsg     = 512
)

func (r *recentDecisions) add(e audit.Entry, in []policies.Violation) {
	vs := make([]policies.Violation, 0, min(len(in), maxRecentViolations))
	for i, v := range in {
		if i == maxRecentViolations {
			break
		}
		vs = append(vs, policies.Violation{Rule: audit.Truncate(v.Rule, 32), Msg: audit.Truncate(v.Msg, maxViolationMsg)})
	}
	e = e.Bounded()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = recentDecision{Entry: e, Violations: vs}
	r.next = (r.next + 1) % len(r.ring)
	if r.next == 0 {
		r.full = true
	}
}

// latest returns up to n decisions, newest first.
func (r *recentDecisions) latest(n int) []recentDecision {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := r.next
	if r.full {
		size = len(r.ring)
	}
	n = min(n, size)
	out := make([]recentDecision, 0, n)
	for i := range n {
		out = append(out, r.ring[(r.next-1-i+len(r.ring))%len(r.ring)])
	}
	return out
}

// listDecisions is GET /v1/decisions?limit=N.
func (s *Server) listDecisions(c echo.Context) error {
	limit := 50
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > recentCapacity {
			return invalid("limit", "must be an integer from 1 to %d", recentCapacity)
		}
		limit = n
	}
	return c.JSON(http.StatusOK, map[string]any{"decisions": s.recent.latest(limit)})
}
