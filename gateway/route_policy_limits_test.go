package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/replay"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/policies/policytest"
	"sandgate/render/isolation"
	"sandgate/store"
)

// bigIsolationPlan is a well-formed isolation plan inflated as the
// issue's attacker did (17,000 nomad_ports, 500 rules of the chain): its
// decision costs seconds of CPU.
func bigIsolationPlan(t *testing.T) map[string]any {
	t.Helper()
	p, err := isolation.New(isolation.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var plan map[string]any
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	ports := make([]any, 17000)
	for i := range ports {
		ports[i] = 1024 + i
	}
	plan["nomad_ports"] = ports
	rules := plan["rules"].([]any)
	var chain map[string]any
	for _, r := range rules {
		if rm := r.(map[string]any); rm["chain"] == plan["chain"] {
			chain = rm
			break
		}
	}
	if chain == nil {
		t.Fatalf("no rule of chain %v in the plan", plan["chain"])
	}
	for i := range 500 {
		r := map[string]any{}
		for k, v := range chain {
			r[k] = v
		}
		r["id"] = "x" + strconv.Itoa(i)
		rules = append(rules, r)
	}
	plan["rules"] = rules
	return plan
}

// A dry run whose evaluation runs past policy.evaluate.timeout is stopped
// (OPA's cancellation) and refused with a problem naming the bound; a
// dry run of an ordinary plan still decides.
func TestADryRunPastItsDeadlineIsStoppedAndNamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{config: func(c *gateway.Config) { c.Policy.EvaluateTimeout = time.Second }})
	p, err := isolation.New(isolation.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r, m := h.evaluate(h.operator, map[string]any{"entrypoint": "isolation", "input": map[string]any{"plan": p}}); m == nil || m["allow"] != true {
		t.Fatalf("a dry run of the default isolation plan: %d %s", r.Status, r.Body)
	}
	body, err := json.Marshal(map[string]any{"entrypoint": "isolation", "input": map[string]any{"plan": bigIsolationPlan(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > gateway.DefaultEvaluateMaxBytes {
		t.Fatalf("the big plan is %d bytes, past the default bound: it would not reach the evaluation", len(body))
	}
	r := h.gw.Do(http.MethodPost, "/v1/policy/evaluate", h.operator, string(body))
	m := apitest.ExpectProblem(t, r, http.StatusUnprocessableEntity, "evaluation_deadline_exceeded")
	if m["limit"] != "policy.evaluate.timeout" || !strings.Contains(m["detail"].(string), "1s") {
		t.Fatalf("the deadline problem does not name its bound: %s", r.Body)
	}
}

// A dry run's body past policy.evaluate.max_bytes is a 413 naming the
// bound, by its Content-Length or as read, before anything is decoded
// or evaluated.
func TestADryRunBodyPastItsBoundIs413(t *testing.T) {
	t.Parallel()
	const bound = 4096
	h := newHarness(t, harnessOptions{config: func(c *gateway.Config) { c.Policy.EvaluateMaxBytes = bound }})
	doc := func(size int) []byte {
		b, _ := json.Marshal(map[string]any{"entrypoint": "authz", "input": map[string]any{"pad": strings.Repeat("x", size)}})
		return b
	}
	small, big := doc(bound-100), doc(bound)
	if len(small) > bound || len(big) <= bound {
		t.Fatalf("sizes %d and %d around %d", len(small), len(big), bound)
	}
	if r, m := h.evaluate(h.operator, json.RawMessage(small)); m == nil {
		t.Fatalf("a body within the bound: %d %s", r.Status, r.Body)
	}
	for name, chunked := range map[string]bool{"with its Content-Length": false, "chunked": true} {
		var rd io.Reader = bytes.NewReader(big)
		if chunked {
			rd = io.MultiReader(rd) // no length known: sent chunked
		}
		r := h.gw.DoWith(apitest.Request{Method: http.MethodPost, Path: "/v1/policy/evaluate", Token: h.operator, Body: rd, Context: t.Context()})
		data := r.Body
		m := apitest.ExpectProblem(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
		if m["limit"] != "policy.evaluate.max_bytes" || !strings.Contains(m["detail"].(string), strconv.Itoa(bound)) {
			t.Fatalf("%s: the 413 does not name its bound: %s", name, data)
		}
	}
}

// gateStore holds every Get of one sandbox until the gate opens, and says
// when one is held: a dry run of a request to that sandbox then waits
// inside its evaluation for as long as the test wants.
type gateStore struct {
	store.Store
	id      string
	armed   chan struct{} // closed: Gets of id wait
	gate    chan struct{} // closed: they go on
	entered chan struct{}
	armOnce sync.Once
}

func (g *gateStore) Get(ctx context.Context, id string) (store.Sandbox, error) {
	select {
	case <-g.armed:
		if id == g.id {
			g.entered <- struct{}{}
			select {
			case <-g.gate:
			case <-ctx.Done():
				return store.Sandbox{}, ctx.Err()
			}
		}
	default:
	}
	return g.Store.Get(ctx, id)
}

// One dry run more than policy.evaluate.concurrency is refused at once
// with 429 policy_busy and a Retry-After; the ones running finish.
func TestOneDryRunMoreThanTheLimitIsBusy(t *testing.T) {
	t.Parallel()
	const limit = 2
	gs := &gateStore{armed: make(chan struct{}), gate: make(chan struct{}), entered: make(chan struct{}, limit+1)}
	h := newHarness(t, harnessOptions{
		wrapStore: func(st store.Store) store.Store { gs.Store = st; return gs },
		config:    func(c *gateway.Config) { c.Policy.EvaluateConcurrency = limit },
	})
	agent := h.mint(token.RoleAgent, "ci")
	id := h.gw.Create(agent, nil).ID
	gs.id = id
	gs.armOnce.Do(func() { close(gs.armed) })
	dry := map[string]any{"request": map[string]any{"method": "GET", "path": "/v1/sandboxes/" + id, "token_claims": map[string]any{"role": "agent", "sub": "ci"}}}
	var wg sync.WaitGroup
	results := make(chan apitest.Reply, limit)
	for range limit {
		wg.Go(func() { results <- h.gw.Do(http.MethodPost, "/v1/policy/evaluate", h.operator, dry) })
	}
	for range limit {
		select {
		case <-gs.entered:
		case <-time.After(time.Minute):
			t.Fatal("the dry runs did not reach their evaluation")
		}
	}
	// The next one is refused without being let in.
	third := make(chan apitest.Reply, 1)
	go func() { third <- h.gw.Do(http.MethodPost, "/v1/policy/evaluate", h.operator, dry) }()
	var r apitest.Reply
	select {
	case r = <-third:
	case <-gs.entered:
		close(gs.gate)
		t.Fatalf("a dry run past the limit of %d was let in to evaluate", limit)
	}
	m := apitest.ExpectProblem(t, r, http.StatusTooManyRequests, "policy_busy")
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if m["limit"] != "policy.evaluate.concurrency" {
		t.Fatalf("the busy problem does not name its bound: %s", r.Body)
	}
	close(gs.gate)
	wg.Wait()
	close(results)
	for r := range results {
		if r.Status != http.StatusOK {
			t.Fatalf("a dry run that held its place: %d %s", r.Status, r.Body)
		}
	}
	if _, m := h.evaluate(h.operator, dry); m == nil || m["allow"] != true {
		t.Fatal("a dry run after the others ended was refused")
	}
}

// candidateWith builds a candidate bundle: the embedded bundle with small
// tests and extra files (name in the bundle -> contents).
func candidateWith(t *testing.T, revision string, extra map[string][]byte) []byte {
	t.Helper()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var bundle bytes.Buffer
	if _, err := policies.Build(t.Context(), policies.BuildOptions{Dir: dir, Revision: revision}, &bundle); err != nil {
		t.Fatal(err)
	}
	return bundle.Bytes()
}

// replayOf posts a candidate to POST /v1/policy/replay.
func (h *harness) replayOf(ctx context.Context, tok string, candidate []byte) apitest.Reply {
	h.t.Helper()
	r, err := h.gw.API().Send(apitest.Request{Method: http.MethodPost, Path: "/v1/policy/replay", Token: tok, Body: candidate,
		ContentType: "application/gzip", Context: ctx})
	if err != nil {
		return apitest.Reply{Status: -1, Body: []byte(err.Error())}
	}
	return r
}

// A candidate whose rule doubles a string 25 times (32 GiB) ends its
// replay worker at the worker's memory limit: the answer names the limit,
// the gateway's heap does not grow toward what the candidate asked, and
// the gateway serves on. Not parallel: the heap is measured.
func TestARunawayCandidateEndsItsWorkerNotTheGateway(t *testing.T) {
	h := newHarness(t, harnessOptions{logInputs: true})
	agent := h.mint(token.RoleAgent, "ci")
	id, session := h.gw.Create(agent, nil).IDToken()
	if r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"echo", "hi"}}); r.Status != http.StatusOK {
		t.Fatalf("exec: %d %s", r.Status, r.Body)
	}
	runaway, err := os.ReadFile(filepath.Join("testdata", "replay", "runaway.rego"))
	if err != nil {
		t.Fatal(err)
	}
	candidate := candidateWith(t, "runaway-1", map[string][]byte{"authz/runaway.rego": runaway})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := h.replayOf(t.Context(), h.operator, candidate)
	runtime.ReadMemStats(&after)
	m := apitest.ExpectProblem(t, r, http.StatusUnprocessableEntity, "candidate_exceeded_limits")
	if m["limit"] != "policy.replay.memory_bytes" || !strings.Contains(m["detail"].(string), "memory limit") {
		t.Fatalf("the problem does not name the memory limit: %s", r.Body)
	}
	// The candidate asked for 32 GiB; the gateway's heap grew by far less
	// than the worker's 1 GiB limit.
	const bound = 256 << 20
	if after.HeapSys > before.HeapSys+bound {
		t.Fatalf("the gateway's heap grew by %d MiB during the replay (bound %d MiB)", (after.HeapSys-before.HeapSys)>>20, bound>>20)
	}
	t.Logf("gateway heap: %d MiB obtained before, %d MiB after", before.HeapSys>>20, after.HeapSys>>20)
	if r := h.gw.Do(http.MethodGet, "/v1/policy", h.operator, nil); r.Status != http.StatusOK {
		t.Fatalf("the gateway after the runaway replay: %d %s", r.Status, r.Body)
	}
}

// A replay worker that dies other than by a limit is a clear 503; one
// that runs past its CPU time is ended by the kernel, and one past the
// wall clock by the gateway, and each is named. Nothing is replayed.
func TestAReplayWorkerEndedEarlyIsAClearError(t *testing.T) {
	t.Parallel()
	path := []string{"PATH=/usr/bin:/bin"}
	cases := []struct {
		name   string
		script string
		limits func(*gateway.PolicyLimits)
		status int
		code   string
		limit  string
		detail string
	}{
		{"killed by someone else", `head -c 1 >/dev/null; kill -KILL $$`, nil,
			http.StatusServiceUnavailable, "unavailable", "", "killed by signal killed"},
		{"crashed", `echo "panic: the worker broke" >&2; exit 2`, nil,
			http.StatusServiceUnavailable, "unavailable", "", "panic: the worker broke"},
		{"past its CPU time", `while :; do :; done`, func(l *gateway.PolicyLimits) { l.ReplayCPU = time.Second },
			http.StatusUnprocessableEntity, "candidate_exceeded_limits", "policy.replay.cpu_time", "cpu_time limit"},
		{"past the wall clock", `exec sleep 300`, func(l *gateway.PolicyLimits) { l.ReplayTimeout = time.Second },
			http.StatusUnprocessableEntity, "candidate_exceeded_limits", "policy.replay.timeout", "wall_clock limit"},
	}
	candidate := candidateWith(t, "candidate-1", nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{logInputs: true, config: func(cfg *gateway.Config) {
				cfg.Policy.ReplayWorker = replay.Command{Path: "/bin/sh", Args: []string{"-c", c.script}, Env: path}
				if c.limits != nil {
					c.limits(&cfg.Policy)
				}
			}})
			r := h.replayOf(t.Context(), h.operator, candidate)
			m := apitest.ExpectProblem(t, r, c.status, c.code)
			if lim, _ := m["limit"].(string); lim != c.limit || !strings.Contains(m["detail"].(string), c.detail) {
				t.Fatalf("want limit %q and %q in the detail: %s", c.limit, c.detail, r.Body)
			}
			if r := h.gw.Do(http.MethodGet, "/v1/policy", h.operator, nil); r.Status != http.StatusOK {
				t.Fatalf("the gateway after the worker ended: %d %s", r.Status, r.Body)
			}
		})
	}
}

// One replay more than policy.replay.concurrency is refused at once with
// 429 policy_busy; the running one ends when its caller goes away.
func TestOneReplayMoreThanTheLimitIsBusy(t *testing.T) {
	t.Parallel()
	started := filepath.Join(t.TempDir(), "started")
	h := newHarness(t, harnessOptions{config: func(cfg *gateway.Config) {
		cfg.Policy.ReplayWorker = replay.Command{Path: "/bin/sh", Args: []string{"-c", `touch "$1"; exec sleep 300`, "sh", started},
			Env: []string{"PATH=/usr/bin:/bin"}}
	}})
	candidate := candidateWith(t, "candidate-1", nil)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan apitest.Reply, 1)
	go func() { first <- h.replayOf(ctx, h.operator, candidate) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first replay's worker never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := h.replayOf(t.Context(), h.operator, candidate)
	m := apitest.ExpectProblem(t, r, http.StatusTooManyRequests, "policy_busy")
	if r.Header.Get("Retry-After") == "" || m["limit"] != "policy.replay.concurrency" {
		t.Fatalf("the busy replay: %v %s", r.Header, r.Body)
	}
	cancel()
	<-first
}
