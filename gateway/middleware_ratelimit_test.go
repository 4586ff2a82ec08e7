package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/audit"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
	"sandgate/policies"
)

// The rate limits these tests give policy data (Q1): a session is held to
// one request every two seconds after a burst of 2, an agent to 5 a second
// after 10, the anonymous routes to 1 a second after 3 per address.
var testRateLimits = map[string]policies.RateLimit{
	"operator":  {RequestsPerSecond: 1000, Burst: 1000},
	"reviewer":  {RequestsPerSecond: 10, Burst: 10},
	"agent":     {RequestsPerSecond: 5, Burst: 10},
	"session":   {RequestsPerSecond: 0.5, Burst: 2},
	"anonymous": {RequestsPerSecond: 1, Burst: 3},
}

// rateLimitHarness is the gateway on a fake clock with testRateLimits (or
// limits) and its own engine, its decision log rotated as audit says.
func rateLimitHarness(t *testing.T, limits map[string]policies.RateLimit, auditCfg func(*audit.Config), cfg func(*gateway.Config)) *harness {
	t.Helper()
	if limits == nil {
		limits = testRateLimits
	}
	engine, err := policies.New(context.Background(), policies.Config{Dir: gatewaytest.BundleWithRateLimits(t, limits)})
	if err != nil {
		t.Fatal(err)
	}
	return harnessOf(t, gatewaytest.New(t, gatewaytest.Options{
		Engine: engine, Clock: gatewaytest.NewClock(time.Now().UTC().Truncate(time.Second)),
		AuditConfig: auditCfg, Config: cfg,
	}))
}

// allDecisionLines reads every retained file of the decision log, oldest
// first.
func (h *harness) allDecisionLines() []audit.Entry {
	h.t.Helper()
	var out []audit.Entry
	for _, name := range []string{"decisions.jsonl.2", "decisions.jsonl.1", "decisions.jsonl"} {
		f, err := os.Open(filepath.Join(h.dataDir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			h.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			var e audit.Entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				h.t.Fatalf("%s: %v", name, err)
			}
			out = append(out, e)
		}
		_ = f.Close()
	}
	return out
}

// The acceptance test: one session token sending ten times its
// limit for 30 s cannot push another principal's decisions out of a small
// decision log, and leaves one line per allowed request plus about one per
// window.
func TestOneSessionTokenFloodingCannotRotateAnotherPrincipalsDecisionsAway(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, func(c *audit.Config) { c.MaxBytes, c.Keep = 16<<10, 1 }, nil)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	victim := h.mint(token.RoleAgent, "victim")
	for range 5 {
		if r := h.gw.Do(http.MethodGet, "/v1/sandboxes", victim, nil); r.Status != http.StatusOK {
			t.Fatalf("victim: %d %s", r.Status, r.Body)
		}
	}

	const seconds, perSecond = 30, 5 // ten times the session's 0.5 a second
	allowed, limited := 0, 0
	for range seconds {
		for range perSecond {
			switch r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status {
			case http.StatusOK:
				allowed++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("flood: %d %s", r.Status, r.Body)
			}
		}
		h.clock.Advance(time.Second)
	}
	h.clock.Advance(10 * time.Second) // the last window ends
	h.srv.FlushRateLimits()

	// 2 at once, then one every 2 s.
	if want := 2 + seconds/2; allowed > want+1 || allowed < want-1 {
		t.Errorf("the flood was allowed %d requests, want about %d", allowed, want)
	}
	sessionPrincipal := "session:" + id
	victimLines, floodDecisions, floodWindows, reported := 0, 0, 0, 0
	for _, e := range h.allDecisionLines() {
		switch {
		case e.Principal == "agent:victim":
			victimLines++
		case e.Principal == sessionPrincipal && e.Entrypoint == "rate_limit":
			floodWindows++
			var n int
			if _, err := fmt.Sscanf(e.Action, "rate_limited count=%d", &n); err != nil {
				t.Fatalf("rate_limit line %q: %v", e.Action, err)
			}
			reported += n
			if e.Allow || len(e.RuleIDs) != 1 || e.RuleIDs[0] != "Q1" {
				t.Errorf("rate_limit line %+v: want allow false and rule Q1", e)
			}
		case e.Principal == sessionPrincipal:
			floodDecisions++
		}
	}
	if victimLines != 5 {
		t.Errorf("%d of the victim's 5 decision lines are left in the log", victimLines)
	}
	if floodDecisions != allowed {
		t.Errorf("the flood left %d decision lines for %d allowed requests", floodDecisions, allowed)
	}
	if floodWindows < 1 || floodWindows > seconds/10+1 {
		t.Errorf("the flood left %d aggregated lines over %d s, want one per 10 s window", floodWindows, seconds)
	}
	if reported != limited {
		t.Errorf("the aggregated lines report %d refused requests, %d were refused", reported, limited)
	}
	// A reviewer finds them through the decisions API.
	r := h.gw.Do(http.MethodGet, "/v1/decisions?entrypoint=rate_limit&principal="+sessionPrincipal, h.operator, nil)
	if got, _ := r.JSON(t)["decisions"].([]any); r.Status != http.StatusOK || len(got) != floodWindows {
		t.Errorf("GET /v1/decisions?entrypoint=rate_limit: %d, %d entries, want %d: %.300s", r.Status, len(got), floodWindows, r.Body)
	}
}

func TestARequestPastItsBucketIs429RateLimitedWithRetryAfter(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, nil, nil)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	for i := range 2 {
		if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i+1, r.Status, r.Body)
		}
	}
	before := len(h.allDecisionLines())
	r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil)
	m := apitest.ExpectProblem(t, r, http.StatusTooManyRequests, "rate_limited", "Q1")
	if got := r.Header.Get("Retry-After"); got != "2" { // one request every 2 s
		t.Errorf("Retry-After %q, want 2", got)
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, "session:"+id) || !strings.Contains(d, "rate_limits") {
		t.Errorf("detail %q names neither the principal nor the data", d)
	}
	if _, ok := m["decision_id"]; ok {
		t.Errorf("a rate-limited request took a decision: %s", r.Body)
	}
	if after := len(h.allDecisionLines()); after != before {
		t.Errorf("a rate-limited request wrote %d decision lines", after-before)
	}
	h.clock.Advance(2 * time.Second)
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK {
		t.Fatalf("after Retry-After: %d %s", r.Status, r.Body)
	}
}

func TestEachRoleIsLimitedByItsOwnNumbersAndEachPrincipalByItsOwnBucket(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, nil, nil)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	other := h.gw.Create(h.operator, nil).Token
	agent := h.mint(token.RoleAgent, "ci")
	// At the same pace, the agent's role (burst 10) admits what the
	// session's (burst 2) refuses.
	status := map[string][]int{}
	for range 6 {
		status["agent"] = append(status["agent"], h.gw.Do(http.MethodGet, "/v1/sandboxes", agent, nil).Status)
		status["session"] = append(status["session"], h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil).Status)
	}
	for i, s := range status["agent"] {
		if s != http.StatusOK {
			t.Fatalf("agent request %d: %d (all: %v)", i+1, s, status["agent"])
		}
	}
	if got := status["session"]; got[1] != http.StatusOK || got[2] != http.StatusTooManyRequests || got[5] != http.StatusTooManyRequests {
		t.Fatalf("session statuses %v, want 2 admitted then 429", got)
	}
	// Another session (another principal of the same role) has its own bucket.
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes", other, nil); r.Status == http.StatusTooManyRequests {
		t.Fatalf("another session was limited by the first one's bucket: %s", r.Body)
	}
}

func TestTheAnonymousRoutesAreLimitedPerClientAddress(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, nil, nil)
	get := func(path, peer, xff string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = peer
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		return rec
	}
	// Every route that takes no token shares the address's bucket (burst 3);
	// an X-Forwarded-For from an untrusted peer changes nothing.
	for i, path := range []string{"/healthz", "/openapi.json", "/v1/capabilities"} {
		if rec := get(path, "192.0.2.7:40000", "198.51.100."+string(rune('1'+i))); rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	for _, path := range []string{"/readyz", "/llms.txt", "/metrics", "/", "/ui/app.js", "/mcp"} {
		rec := get(path, "192.0.2.7:40001", "203.0.113.9")
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
			rec.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(rec.Body.String(), `"rate_limited"`) {
			t.Fatalf("%s past the address's burst: %d %v %s", path, rec.Code, rec.Header(), rec.Body)
		}
	}
	// Another address has its own bucket.
	if rec := get("/healthz", "192.0.2.8:40000", ""); rec.Code != http.StatusOK {
		t.Fatalf("another address: %d %s", rec.Code, rec.Body)
	}
	h.clock.Advance(time.Second)
	if rec := get("/healthz", "192.0.2.7:40000", ""); rec.Code != http.StatusOK {
		t.Fatalf("after a second: %d %s", rec.Code, rec.Body)
	}
}

func TestATrustedProxysForwardedForNamesTheClient(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, nil, func(c *gateway.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	get := func(xff string) int {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.RemoteAddr = "10.1.2.3:5000"
		req.Header.Set("X-Forwarded-For", xff)
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	for range 3 {
		if c := get("192.0.2.10"); c != http.StatusOK {
			t.Fatalf("client 192.0.2.10 within its burst: %d", c)
		}
	}
	if c := get("192.0.2.10"); c != http.StatusTooManyRequests {
		t.Fatalf("client 192.0.2.10 past its burst: %d", c)
	}
	// Behind the same proxy, another client has its own bucket; what a
	// client writes before the proxy's hop is not believed.
	if c := get("192.0.2.11"); c != http.StatusOK {
		t.Fatalf("client 192.0.2.11: %d", c)
	}
	if c := get("192.0.2.99, 192.0.2.10"); c != http.StatusTooManyRequests {
		t.Fatalf("a client prepending another address escaped its bucket: %d", c)
	}
}

func TestAReloadWithOtherNumbersAppliesToTheNextRequest(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, nil, nil)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	for range 2 {
		h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil)
	}
	if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d", r.Status)
	}
	looser := map[string]policies.RateLimit{}
	for k, v := range testRateLimits {
		looser[k] = v
	}
	looser["session"] = policies.RateLimit{RequestsPerSecond: 100, Burst: 100}
	if err := h.engine.Reload(context.Background(), policies.Config{Dir: gatewaytest.BundleWithRateLimits(t, looser)}); err != nil {
		t.Fatal(err)
	}
	// The bucket keeps what it held (empty) and from the next request on
	// refills at 100 a second, up to 100.
	r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil)
	if !strings.Contains(string(r.Body), "100 requests per second") && r.Status != http.StatusOK {
		t.Fatalf("the first request after the reload: %d %s", r.Status, r.Body)
	}
	h.clock.Advance(100 * time.Millisecond)
	for i := range 10 {
		if r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil); r.Status != http.StatusOK {
			t.Fatalf("request %d under the looser limits: %d %s", i+1, r.Status, r.Body)
		}
	}
	// And back: the tighter numbers hold at once.
	if err := h.engine.Reload(context.Background(), policies.Config{Dir: gatewaytest.BundleWithRateLimits(t, testRateLimits)}); err != nil {
		t.Fatal(err)
	}
	codes := []int{}
	for range 4 {
		codes = append(codes, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil).Status)
	}
	if codes[3] != http.StatusTooManyRequests {
		t.Fatalf("under the tighter limits again: %v", codes)
	}
}

func TestTheRateLimitedCounterHasASeriesPerRoleFromTheStart(t *testing.T) {
	t.Parallel()
	h := rateLimitHarness(t, nil, nil, nil)
	metrics := func() string {
		r := h.gw.Do(http.MethodGet, "/metrics", "", nil)
		h.clock.Advance(time.Second) // the scrape's own bucket
		return string(r.Body)
	}
	body := metrics()
	for role := range testRateLimits {
		if line := `sandgate_rate_limited_total{role="` + role + `"} 0`; !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	id, session := h.gw.Create(h.operator, nil).IDToken()
	for range 3 {
		h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id, session, nil)
	}
	if line := `sandgate_rate_limited_total{role="session"} 1`; !strings.Contains(metrics(), line) {
		t.Errorf("/metrics lacks %s after one refusal", line)
	}
}

// Every route can answer 429 rate_limited, and that answer (its problem and
// its Retry-After) is the one the OpenAPI document gives it.
func TestEveryRoutesRateLimitedAnswerIsTheOpenAPIDocuments(t *testing.T) {
	t.Parallel()
	tight := map[string]policies.RateLimit{}
	for k := range testRateLimits {
		tight[k] = policies.RateLimit{RequestsPerSecond: 0.01, Burst: 1}
	}
	h := rateLimitHarness(t, tight, nil, nil)
	// Reading the served document empties the loopback address's bucket,
	// one request the operator's.
	doc := servedDoc(t, h)
	h.gw.Do(http.MethodGet, "/v1/hosts", h.operator, nil)
	for _, rt := range h.srv.Echo().Routes() {
		if rt.Method == "echo_route_not_found" {
			continue
		}
		path := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(rt.Path, ":id", "abcdefgh12345678"), ":node", "worker-1"), ":jti", "01J")
		path = strings.ReplaceAll(path, "*", "app.js")
		c := apiCall{method: rt.Method, template: rt.Path, path: path, token: h.operator}
		if c.method == http.MethodPost || c.method == http.MethodPut {
			c.body = []byte(`{}`)
		}
		if status := validateCall(t, h, doc, c); status != http.StatusTooManyRequests {
			t.Errorf("%s %s: %d, want 429", rt.Method, rt.Path, status)
		}
	}
}
