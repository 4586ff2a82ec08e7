package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sandgate/gateway/audit"
	"sandgate/gateway/wire"
)

// Query strings, path ids and the Authorization header, through the whole
// pipeline (pipeline_fuzz_test.go).

// FuzzLogsQuery: ?stream=&tail_bytes= of GET /v1/sandboxes/{id}/logs. What
// reaches the handler names a stream of the task (stdout, stderr, or the
// default) and a tail within [1, exec.max_logs_tail_bytes]; a tail_bytes
// that is no integer is a 400 naming it, with a bounded excerpt; anything
// else is refused by E3 alone.
func FuzzLogsQuery(f *testing.F) {
	p := newPipeline(f)
	p.capture(f, http.MethodGet, "/v1/sandboxes/:id/logs")
	maxTail := int64(p.settings.Exec.MaxLogsTailBytes)
	f.Fuzz(func(t *testing.T, rawQuery string) {
		if strings.ContainsAny(rawQuery, "#") {
			t.Skip("a fragment is not part of a request target")
		}
		a, ok := p.serve(http.MethodGet, "/v1/sandboxes/"+fuzzSandboxID+"/logs?"+rawQuery, "Bearer {session}", nil)
		if !ok {
			t.Skip("not a request net/http would pass on")
		}
		q, _ := url.ParseQuery(rawQuery)
		stream, tail := q.Get("stream"), q.Get("tail_bytes")
		if a.status == http.StatusOK {
			got := a.got.query
			if a.got.qerr != nil || got.Stream != stream {
				t.Fatalf("the handler read %+v (%v) from %q", got, a.got.qerr, rawQuery)
			}
			if stream != "" && stream != "stdout" && stream != "stderr" {
				t.Fatalf("stream %q let through (E3)", stream)
			}
			if tail == "" {
				if got.TailBytes != nil {
					t.Fatalf("tail_bytes %d read from an absent parameter", *got.TailBytes)
				}
				return
			}
			n, err := strconv.ParseInt(tail, 10, 64)
			if err != nil || got.TailBytes == nil || *got.TailBytes != n {
				t.Fatalf("tail_bytes %q read as %v", tail, got.TailBytes)
			}
			if n < 1 || n > maxTail {
				t.Fatalf("tail_bytes %d let through (E3: [1, %d])", n, maxTail)
			}
			return
		}
		checkProblem(t, a, http.StatusBadRequest, http.StatusForbidden)
		switch a.status {
		case http.StatusBadRequest:
			if _, err := strconv.ParseInt(tail, 10, 64); err == nil || a.problem.Field != "tail_bytes" {
				t.Fatalf("a 400 for tail_bytes %q: %s", tail, a.body)
			}
			if len(a.problem.Detail) > 256 {
				t.Fatalf("a 400 detail of %d bytes echoes the input", len(a.problem.Detail))
			}
		case http.StatusForbidden:
			if !slices.Equal(a.problem.RuleIDs, []string{"E3"}) {
				t.Fatalf("logs query refused by %v, want [E3]: %s", a.problem.RuleIDs, a.body)
			}
		}
	})
}

// FuzzQueryParams: the query of the other routes that read one, each with
// the handler production runs: ?all= of GET /v1/sandboxes (terminal
// records only with all=true, and never another principal's), ?limit= of
// GET /v1/decisions (an integer in [1, 1000], and its other filters, or a 400 naming the parameter) and
// ?reclaim= of DELETE /v1/hosts/{node}/enrollment (true or false, or a
// 400 naming reclaim).
func FuzzQueryParams(f *testing.F) {
	p := newPipeline(f)
	f.Fuzz(func(t *testing.T, route uint8, rawQuery string) {
		if strings.ContainsAny(rawQuery, "#") {
			t.Skip("a fragment is not part of a request target")
		}
		q, _ := url.ParseQuery(rawQuery)
		switch route % 3 {
		case 0:
			a, ok := p.serve(http.MethodGet, "/v1/sandboxes?"+rawQuery, "Bearer {agent}", nil)
			if !ok {
				t.Skip()
			}
			if a.status == http.StatusBadRequest {
				// a bad listing parameter is refused, naming it, without
				// echoing the input at length
				if a.problem.Field == "" || len(a.problem.Detail) > 256 {
					t.Fatalf("list: a 400 that does not name its parameter briefly: %s", a.body)
				}
				return
			}
			if a.status != http.StatusOK {
				t.Fatalf("list: %d %s", a.status, a.body)
			}
			var out struct {
				Sandboxes []wire.Sandbox `json:"sandboxes"`
			}
			if err := json.Unmarshal(a.body, &out); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, v := range out.Sandboxes {
				if v.Principal != fuzzAgentPrincipal {
					t.Fatalf("an agent's list shows %s's sandbox %s", v.Principal, v.ID)
				}
				ids = append(ids, v.ID)
			}
			for _, id := range ids {
				if id != fuzzSandboxID && id != fuzzEndedID {
					t.Fatalf("?%s lists %s, not the agent's", rawQuery, id)
				}
			}
			if len(q) == 1 && len(q["all"]) == 1 || len(q) == 0 { // no filter: exactly the agent's, by all
				want := []string{fuzzSandboxID}
				if q.Get("all") == "true" {
					want = append(want, fuzzEndedID)
				}
				slices.Sort(ids)
				slices.Sort(want)
				if !slices.Equal(ids, want) {
					t.Fatalf("?%s lists %v, want %v: %s", rawQuery, ids, want, a.body)
				}
			}
		case 1:
			a, ok := p.serve(http.MethodGet, "/v1/decisions?"+rawQuery, "Bearer {op}", nil)
			if !ok {
				t.Skip()
			}
			limit, err := strconv.Atoi(q.Get("limit"))
			if q.Get("limit") == "" {
				limit, err = 50, nil
			}
			if a.status == http.StatusBadRequest {
				// a 400 names a parameter the query has, briefly
				checkProblem(t, a, http.StatusBadRequest)
				if !q.Has(a.problem.Field) || len(a.problem.Detail) > 256 {
					t.Fatalf("?%s refused naming %q: %s", rawQuery, a.problem.Field, a.body)
				}
				return
			}
			// answered: every parameter it reads was valid
			if err != nil || limit < 1 || limit > audit.MaxQueryLimit {
				t.Fatalf("limit %q answered %d %s", q.Get("limit"), a.status, a.body)
			}
			if b := q.Get("allow"); b != "" && b != "true" && b != "false" {
				t.Fatalf("allow %q answered %d", b, a.status)
			}
			if a.status != http.StatusOK {
				t.Fatalf("?%s: %d %s", rawQuery, a.status, a.body)
			}
			var out struct {
				Decisions []json.RawMessage `json:"decisions"`
			}
			if err := json.Unmarshal(a.body, &out); err != nil || len(out.Decisions) > limit {
				t.Fatalf("limit %d: %d decisions (%v)", limit, len(out.Decisions), err)
			}
			if len(q) == 1 && q.Has("limit") && len(out.Decisions) == 0 {
				t.Fatalf("limit %d alone: no decisions, though this very request was decided", limit)
			}
		case 2:
			a, ok := p.serve(http.MethodDelete, "/v1/hosts/ghost-node/enrollment?"+rawQuery, "Bearer {op}", nil)
			if !ok {
				t.Skip()
			}
			switch r := q.Get("reclaim"); r {
			case "", "true", "false":
				checkProblem(t, a, http.StatusConflict)
				if a.problem.Code != wire.CodeHostNotEnrolled {
					t.Fatalf("unenroll of an unknown node: %s", a.body)
				}
			default:
				checkProblem(t, a, http.StatusBadRequest)
				if a.problem.Field != "reclaim" {
					t.Fatalf("reclaim %q refused naming %q", r, a.problem.Field)
				}
			}
		}
	})
}

// FuzzSandboxPathID: GET /v1/sandboxes/{id} with any id, escaped as one
// path segment or written raw, for an operator and for the running
// sandbox's session token. Only a known id answers 200 (and shows that
// sandbox); a session token sees only its own; an unknown id is a 404
// that quotes it, never a 5xx.
func FuzzSandboxPathID(f *testing.F) {
	p := newPipeline(f)
	f.Fuzz(func(t *testing.T, id string, raw, session bool) {
		seg := url.PathEscape(id)
		if raw {
			seg = id
		}
		tok := "Bearer {op}"
		if session {
			tok = "Bearer {session}"
		}
		a, ok := p.serve(http.MethodGet, "/v1/sandboxes/"+seg, tok, nil)
		if !ok {
			t.Skip("not a request net/http would pass on")
		}
		switch a.status {
		case http.StatusOK:
			var v wire.Sandbox
			if err := json.Unmarshal(a.body, &v); err != nil {
				t.Fatal(err)
			}
			if v.ID != fuzzSandboxID && v.ID != fuzzEndedID {
				t.Fatalf("id %q shows sandbox %q", id, v.ID)
			}
			if session && v.ID != fuzzSandboxID {
				t.Fatalf("a session token sees sandbox %s", v.ID)
			}
			if !raw && v.ID != id {
				t.Fatalf("escaped id %q shows sandbox %q", id, v.ID)
			}
			return
		case http.StatusNotFound:
			checkProblem(t, a, http.StatusNotFound)
			if a.problem.Code == wire.CodeSandboxNotFound && (!strings.HasPrefix(a.problem.Detail, "sandbox \"") ||
				strings.Contains(a.problem.Detail, fmt.Sprintf("%q", fuzzSandboxID))) {
				t.Fatalf("a 404 for id %q: %s", id, a.body)
			}
			if !raw && id != "" && a.problem.Code != wire.CodeSandboxNotFound {
				t.Fatalf("escaped id %q is not a sandbox route: %s", id, a.body)
			}
		case http.StatusGone: // another sandbox that has ended: T2 and T3
			checkProblem(t, a, http.StatusGone)
			if !session || !strings.Contains(a.problem.Detail, fuzzEndedID) || !slices.Contains(a.problem.RuleIDs, "T3") {
				t.Fatalf("a 410 for id %q: %s", id, a.body)
			}
		default:
			checkProblem(t, a, http.StatusForbidden, http.StatusMethodNotAllowed)
			if a.status == http.StatusForbidden && !session {
				t.Fatalf("an operator refused id %q: %s", id, a.body)
			}
		}
	})
}

// FuzzAuthorizationHeader: any Authorization value on GET /v1/sandboxes.
// {op}, {agent}, {session} and {revoked} stand for this process's tokens.
// Only "Bearer" (any ASCII case), exactly one space and a recorded,
// unrevoked token, with nothing before or after (no tab, no no-break
// space, no second space, no trailing white space), authenticates: the
// one rule of token.ParseBearer, which /mcp shares. Everything else is a
// 401 with its challenge that never echoes the value.
func FuzzAuthorizationHeader(f *testing.F) {
	p := newPipeline(f)
	f.Fuzz(func(t *testing.T, value string) {
		a, ok := p.serve(http.MethodGet, "/v1/sandboxes", value, nil)
		if !ok {
			t.Skip("not a header value net/http would pass on")
		}
		h := p.expand(value)
		scheme, raw, cut := strings.Cut(h, " ")
		bearer := cut && len(scheme) == len("Bearer") && strings.EqualFold(scheme, "Bearer")
		switch {
		case bearer && (raw == p.tokens["{op}"] || raw == p.tokens["{agent}"]):
			if a.status != http.StatusOK {
				t.Fatalf("a valid token refused: %d %s", a.status, a.body)
			}
		case bearer && raw == p.tokens["{session}"]:
			checkProblem(t, a, http.StatusForbidden)
			if !slices.Equal(a.problem.RuleIDs, []string{"T2"}) {
				t.Fatalf("a session token listing: %s", a.body)
			}
		default:
			checkProblem(t, a, http.StatusUnauthorized)
		}
		if a.status != http.StatusOK && len(h) >= 16 && strings.Contains(string(a.body), h) {
			t.Fatalf("the answer echoes the Authorization value: %s", a.body)
		}
	})
}

// FuzzFilesQuery: ?path=&mode=&recursive= of the files routes. What reaches
// a handler is a path the policy confined (F1): absolute, without NUL or a
// ".." segment, normalised at or under one of files.roots on a segment
// boundary, and for a write or delete never a root itself; a PUT's mode
// has only bits within files.allowed_mode_bits (F2).
func FuzzFilesQuery(f *testing.F) {
	p := newPipeline(f)
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		p.capture(f, m, filesRoute)
	}
	roots := p.settings.Files.Roots
	for _, seed := range []string{"path=/workspace/x", "path=/workspace/../etc", "path=/tmp//a/./b/", "path=/workspacefoo", "path=%2Fetc%2Fpasswd", "path=/workspace/x&mode=4755", "path=/workspace&recursive=true", "path=/tmp/%00", "path=/workspace/x&offset=-1", "path=/workspace/x&length=0&offset=3", "path=/workspace/x&length=67108865"} {
		for _, m := range []byte{0, 1, 2} {
			f.Add(m, seed)
		}
	}
	f.Fuzz(func(t *testing.T, which byte, rawQuery string) {
		if strings.ContainsAny(rawQuery, "#") {
			t.Skip("a fragment is not part of a request target")
		}
		method := []string{http.MethodGet, http.MethodPut, http.MethodDelete}[int(which)%3]
		var body []byte
		if method == http.MethodPut {
			body = []byte("x")
		}
		a, ok := p.serve(method, "/v1/sandboxes/"+fuzzSandboxID+"/files?"+rawQuery, "Bearer {session}", body)
		if !ok {
			t.Skip("not a request net/http would pass on")
		}
		if !a.got.reached {
			if a.status < 400 || a.status >= 500 {
				t.Fatalf("%s ?%s: refused with %d %s", method, rawQuery, a.status, a.body)
			}
			return
		}
		q, _ := url.ParseQuery(rawQuery)
		raw := q.Get("path")
		got := a.got.files
		if a.got.ferr != nil || got.raw == nil || *got.raw != raw {
			t.Fatalf("the handler read %+v (%v) from %q", got, a.got.ferr, rawQuery)
		}
		if !strings.HasPrefix(raw, "/") || strings.ContainsRune(raw, 0) || slices.Contains(strings.Split(raw, "/"), "..") {
			t.Fatalf("%s path %q let through (F1)", method, raw)
		}
		n := got.normalised
		under, isRoot := false, false
		for _, r := range roots {
			isRoot = isRoot || n == r
			under = under || n == r || strings.HasPrefix(n, r+"/")
		}
		if !under || (isRoot && method != http.MethodGet) {
			t.Fatalf("%s path %q (normalised %q) let through outside or onto the roots %v (F1)", method, raw, n, roots)
		}
		if got.mode != nil && *got.mode&^int64(p.settings.Files.AllowedModeBits) != 0 {
			t.Fatalf("mode %o let through (F2)", *got.mode)
		}
		if (got.offset != nil && *got.offset < 0) || (got.length != nil && (*got.length < 1 || *got.length > p.settings.Files.MaxReadBytes)) {
			t.Fatalf("window offset %v length %v let through (F2)", got.offset, got.length)
		}
	})
}
