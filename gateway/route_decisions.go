package gateway

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/audit"
	"sandgate/gateway/wire"
)

// listDecisions is GET /v1/decisions?since=&until=&allow=&rule=&principal=
// &entrypoint=&limit=&cursor=&inputs=: a query over the decision log
// (every retained file), newest first.
func (s *Server) listDecisions(c echo.Context) error {
	q, err := decisionQuery(c.QueryParams())
	if err != nil {
		return err
	}
	p, qerr := s.cfg.Decisions.Query(q)
	switch {
	case errors.Is(qerr, audit.ErrBadCursor):
		return invalid("cursor", "is not a next_cursor this gateway returned")
	case qerr != nil:
		return unavailable("the decision log could not be read", qerr)
	}
	if p.Entries == nil {
		p.Entries = []audit.Entry{}
	}
	return c.JSON(http.StatusOK, wire.DecisionPage{Decisions: p.Entries, NextCursor: p.Next})
}

// decisionQuery reads the query parameters of GET /v1/decisions; a bad
// one is a 400 naming it.
func decisionQuery(v url.Values) (audit.Query, error) {
	var q audit.Query
	for _, tf := range []struct {
		name string
		into *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(tf.name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, invalid(tf.name, "must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z")
			}
			*tf.into = t
		}
	}
	if s := v.Get("allow"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil || (s != "true" && s != "false") {
			return q, invalid("allow", "must be true or false")
		}
		q.Allow = &b
	}
	for _, sf := range []struct {
		name string
		into *string
		max  int
	}{{"rule", &q.Rule, 32}, {"principal", &q.Principal, audit.MaxFieldBytes}, {"entrypoint", &q.Entrypoint, 32}, {"cursor", &q.Cursor, 512}} {
		if s := v.Get(sf.name); len(s) > sf.max {
			return q, invalid(sf.name, "must be at most %d bytes", sf.max)
		} else {
			*sf.into = s
		}
	}
	q.Limit = 50
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > audit.MaxQueryLimit {
			return q, invalid("limit", "must be an integer from 1 to %d", audit.MaxQueryLimit)
		}
		q.Limit = n
	}
	if s := v.Get("inputs"); s != "" {
		if s != "true" && s != "false" {
			return q, invalid("inputs", "must be true or false")
		}
		q.WithInputs = s == "true"
	}
	return q, nil
}
