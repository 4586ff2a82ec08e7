package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sandgate/docs"
	"sandgate/gateway/apitest"
	"sandgate/gateway/token"
	"sandgate/store"
)

// decisionLines reads the harness's decision log.
func (h *harness) decisionLines() []map[string]any {
	h.t.Helper()
	f, err := os.Open(filepath.Join(h.dataDir, "decisions.jsonl"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			h.t.Fatalf("decision line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

var serverRequestID = regexp.MustCompile(`^[0-9a-f]{24}$`)

// The request id is the gateway's: a caller's X-Request-Id never takes its
// place in the answer or the decision log; a well-formed one is kept beside
// it as client_request_id, a malformed one is dropped.
func TestRequestIDsAreTheGatewaysOwn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	for _, tc := range []struct {
		name, sent, kept string
	}{
		{"well-formed", "trace-42.a:b_c", "trace-42.a:b_c"},
		{"forged as another request's id", "0123456789abcdef01234567", "0123456789abcdef01234567"},
		{"too long", strings.Repeat("a", 65), ""},
		{"with spaces", "a b", ""},
		{"with a quote", `x"y`, ""},
		{"none", "", ""},
	} {
		before := len(h.decisionLines())
		r := h.gw.DoWith(apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Token: h.operator, Header: map[string]string{"X-Request-Id": tc.sent}})
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Body)
		}
		id := r.Header.Get("X-Request-Id")
		if !serverRequestID.MatchString(id) || id == tc.sent {
			t.Errorf("%s: X-Request-Id %q, want the gateway's own", tc.name, id)
		}
		if got := r.Header.Get("X-Client-Request-Id"); got != tc.kept {
			t.Errorf("%s: X-Client-Request-Id %q, want %q", tc.name, got, tc.kept)
		}
		lines := h.decisionLines()
		if len(lines) != before+1 {
			t.Fatalf("%s: %d new decision lines, want 1", tc.name, len(lines)-before)
		}
		last := lines[len(lines)-1]
		if last["request_id"] != id {
			t.Errorf("%s: logged request_id %v, want %s", tc.name, last["request_id"], id)
		}
		if got, _ := last["client_request_id"].(string); got != tc.kept {
			t.Errorf("%s: logged client_request_id %q, want %q", tc.name, got, tc.kept)
		}
	}
	// and a problem carries the gateway's id too
	r := h.gw.DoWith(apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Token: "", Header: map[string]string{"X-Request-Id": "mine"}})
	if p := r.JSON(t); p["request_id"] != r.Header.Get("X-Request-Id") || p["request_id"] == "mine" {
		t.Fatalf("problem request_id %v, header %s", p["request_id"], r.Header.Get("X-Request-Id"))
	}
}

// Oversized headers are refused before anything is decided or logged, and
// no request can write more than one bounded line to the decision log.
func TestOneRequestCannotFloodTheDecisionLog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	before := len(h.decisionLines())
	// Past the gateway's 16 KiB it answers 431 itself; past twice that
	// (ServerHeaderLimit) the HTTP server of `sandgate serve`, which the
	// test gateway shares, refuses with a bare 431 before reading more.
	r := h.gw.DoWith(apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Token: h.operator, Header: map[string]string{"X-Padding": strings.Repeat("p", 20<<10)}})
	apitest.ExpectProblem(t, r, http.StatusRequestHeaderFieldsTooLarge, "header_too_large")
	if r := h.gw.DoWith(apitest.Request{Method: http.MethodGet, Path: "/v1/sandboxes", Token: h.operator, Header: map[string]string{"X-Padding": strings.Repeat("p", 100<<10)}}); r.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d, want 431", r.Status)
	}
	if n := len(h.decisionLines()); n != before {
		t.Fatalf("a refused oversized request wrote %d decision lines", n-before)
	}
	// A long path id within the header bound still writes one bounded line.
	long := strings.Repeat("k", 12<<10)
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+long, h.operator, nil), http.StatusNotFound, "sandbox_not_found")
	raw, err := os.ReadFile(filepath.Join(h.dataDir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if len(line) >= 8<<10 {
			t.Errorf("decision line %d is %d bytes", i, len(line))
		}
	}
}

// Anyone can send any method to any path without a token: the request
// metric's labels take only known values, so series do not grow.
func TestMetricsLabelsTakeOnlyKnownValues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	series := func() int {
		m := h.gw.Do(http.MethodGet, "/metrics", "", nil)
		n := 0
		for _, l := range strings.Split(string(m.Body), "\n") {
			if strings.HasPrefix(l, "sandgate_http_request_duration_seconds_count{") {
				n++
			}
		}
		return n
	}
	// one request of each kind the flood sends, and a scrape
	h.gw.Do("FOO", "/v1/sandboxes", "", nil)
	h.gw.Do("FOO", "/no/such/path", "", nil)
	h.gw.Do(http.MethodGet, "/no/such/path", "", nil)
	series()
	start := series()
	for i := range 50 {
		method := "M" + strings.Repeat("X", i%20) + string(rune('A'+i%26))
		h.gw.Do(method, "/v1/sandboxes", "", nil)
		h.gw.Do(method, "/nowhere/"+strings.Repeat("z", i), "", nil)
		h.gw.Do(http.MethodGet, "/nowhere/"+strings.Repeat("y", i), "", nil)
	}
	if n := series(); n != start {
		t.Fatalf("request series grew from %d to %d", start, n)
	}
	body := string(h.gw.Do(http.MethodGet, "/metrics", "", nil).Body)
	for _, want := range []string{`method="other",route="unmatched"`, `method="GET",route="unmatched"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `method="FOO"`) || strings.Contains(body, "/no/such/path") {
		t.Error("an invented method or path became a label value")
	}
}

// Every answer carries nosniff: JSON, problems, unknown routes, metrics.
func TestEveryAnswerSaysNosniff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/capabilities", "/llms.txt", "/v1/sandboxes", "/nowhere", "/"} {
		r := h.gw.Do(http.MethodGet, path, "", nil)
		if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options %q", path, r.Status, got)
		}
	}
}

// Ownership is role and subject together (rule B3): an agent token minted
// with the operator's subject owns none of the operator's sandboxes and is
// not charged for them.
func TestAnAgentWithTheOperatorsSubjectOwnsNothingOfIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	opID := h.gw.Create(h.operator, nil).ID // the harness operator's subject is "ops"
	agent := h.mint(token.RoleAgent, "ops")
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes", agent, nil); len(r.JSON(t)["sandboxes"].([]any)) != 0 {
		t.Fatalf("the agent lists the operator's sandboxes: %s", r.Body)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+opID, agent, nil), http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+opID+"/exec", agent, map[string]any{"argv": []string{"true"}}), http.StatusForbidden, "policy_denied", "T2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+opID, agent, nil), http.StatusForbidden, "policy_denied", "T2")
	if rec, _ := h.st.Get(context.Background(), opID); rec.State != store.StateRunning || rec.Principal != "operator:ops" {
		t.Fatalf("operator's record: %s owned by %q", rec.State, rec.Principal)
	}
	// The operator's sandbox does not count against the agent's quota.
	r := h.gw.Do(http.MethodPost, "/v1/tokens", h.operator, map[string]any{
		"role": "agent", "ttl_seconds": 3600, "subject": "ops", "quota": map[string]any{"max_live_sandboxes": 1},
	})
	quota1 := r.JSON(t)["token"].(string)
	id := h.gw.Create(quota1, nil).ID
	if rec, _ := h.st.Get(context.Background(), id); rec.Principal != "agent:ops" {
		t.Fatalf("the agent's record is owned by %q", rec.Principal)
	}
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes", agent, nil); len(r.JSON(t)["sandboxes"].([]any)) != 1 {
		t.Fatalf("the agent lists %s", r.Body)
	}
}

// An ended sandbox says it ended, when and why, from its record, not
// "expired at" a time still to come.
func TestAnEndedSandboxSaysWhenAndWhyItEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.gw.Create(h.operator, nil).ID
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	rec, _ := h.st.Get(context.Background(), id)
	p := apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", h.operator, map[string]any{"argv": []string{"true"}}),
		http.StatusGone, "sandbox_ended", "T3")
	detail, _ := p["detail"].(string)
	if !strings.Contains(detail, "ended at "+rec.EndedAt.UTC().Format(time.RFC3339)) || !strings.Contains(detail, "(destroyed)") ||
		strings.Contains(detail, "expired") {
		t.Fatalf("detail %q", detail)
	}
	if p["end_reason"] != "destroyed" || p["ended_at"] != rec.EndedAt.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("end_reason %v, ended_at %v (record %s)", p["end_reason"], p["ended_at"], rec.EndedAt)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", h.operator, map[string]any{"ttl_seconds": 600}),
		http.StatusGone, "sandbox_ended", "T3")
}

// A failed sandbox is not live for the policy: exec and extend are refused
// by T3 (before, only a Go check stopped them).
func TestAFailedSandboxIsNotLiveForThePolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.gw.Create(h.operator, nil).ID
	if _, err := h.st.Update(context.Background(), id, func(r *store.Sandbox) error {
		r.State, r.EndReason, r.LastError = store.StateFailed, "placement_failed", "no node fits"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", h.operator, map[string]any{"argv": []string{"true"}}),
		http.StatusGone, "sandbox_ended", "T3")
	if d, _ := p["detail"].(string); !strings.Contains(d, "failed") || !strings.Contains(d, "(placement_failed): no node fits") {
		t.Fatalf("detail %q", d)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/extend", h.operator, map[string]any{"ttl_seconds": 600}),
		http.StatusGone, "sandbox_ended", "T3")
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusOK {
		t.Fatalf("status of a failed sandbox: %d %s", r.Status, r.Body)
	}
}

// GET /llms.txt serves docs/llms.txt itself, without a token, and the
// capabilities it names (choices) are what the gateway answers.
func TestTheGatewayServesLLMsTxt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	r := h.gw.Do(http.MethodGet, "/llms.txt", "", nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !bytes.Equal(r.Body, docs.LLMsTxt) {
		t.Fatalf("GET /llms.txt: %d %q %.80q", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if !bytes.HasPrefix(r.Body, []byte("# sandgate\n")) || !bytes.Contains(r.Body, []byte("## Try it")) {
		t.Fatalf("/llms.txt is not the agents' guide: %.200s", r.Body)
	}
	caps := h.gw.Do(http.MethodGet, "/v1/capabilities", "", nil).JSON(t)
	choices, _ := caps["choices"].(map[string]any)
	if fmt.Sprint(choices["profiles"]) != "[strict workspace]" || fmt.Sprint(choices["networks"]) != "[egress none]" || len(choices["images"].([]any)) == 0 {
		t.Fatalf("capabilities choices: %v", caps)
	}
}
