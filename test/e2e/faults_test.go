package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
)

// The simulator's fault table (test/faults) against the real agent: each
// fault is injected by a proxy between a test's gateway and the suite's
// Nomad server (nomadproxy_test.go), or by stopping, freezing or killing a
// client agent of the test's own. Each fault must give the caller a clear
// problem, leave no budget reserved and no job behind, and the gateway's
// loops must recover once it is gone.

// answer is what a request must get: 0 for a 2xx.
type outcome struct {
	status int
	code   string
}

var (
	succeeds    = outcome{}
	unavailable = outcome{http.StatusServiceUnavailable, "nomad_unavailable"}
)

// expectAnswer checks r against w: a 2xx, or a problem document with w's
// status and code, a detail, and Retry-After on a 503.
func expectAnswer(t testing.TB, what string, r apitest.Reply, w outcome) {
	t.Helper()
	if w == succeeds {
		if r.Status < 200 || r.Status > 299 {
			t.Fatalf("%s: want success, got %s", what, r)
		}
		return
	}
	m := apitest.ExpectProblem(t, r, w.status, w.code)
	if d, _ := m["detail"].(string); d == "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("%s: not a problem document with a detail: %s", what, r)
	}
	if w.status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") == "" {
		t.Fatalf("%s: a 503 without Retry-After: %s", what, r)
	}
}

// list is GET /v1/sandboxes (all, as the operator).
func (g *gw) list(t testing.TB) []map[string]any {
	t.Helper()
	r := g.api(t).Do(http.MethodGet, "/v1/sandboxes?all=true", g.operator, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list: %s", r)
	}
	var out struct {
		Sandboxes []map[string]any `json:"sandboxes"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("list: %v: %s", err, r.Body)
	}
	return out.Sandboxes
}

// sandboxBody is a small busybox sandbox on node.
func sandboxBody(node string, kv ...any) map[string]any {
	b := map[string]any{"node": node, "image": imageBusybox, "cpu_mhz": 100, "memory_mb": 128}
	for i := 0; i+1 < len(kv); i += 2 {
		b[kv[i].(string)] = kv[i+1]
	}
	return b
}

// laterRequestsSucceed creates a sandbox on node, runs a command in it and
// destroys it: the gateway works again once the fault is gone.
func (g *gw) laterRequestsSucceed(t *testing.T, node string) {
	t.Helper()
	sb := g.create(t, g.operator, sandboxBody(node))
	if out := g.sh(t, sb.ID, sb.Token, "echo again"); out != "again\n" {
		t.Fatalf("exec after the fault: %q", out)
	}
	if r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+sb.ID, sb.Token, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy after the fault: %s", r)
	}
}

// TestNomadFaultsOnTheRealAgent: with a sandbox made before the fault,
// each fault meets a create, an exec in that sandbox and its destroy while
// the gateway's loops run into it too. Once it is cleared, records, jobs
// and budgets agree and later requests succeed.
func TestNomadFaultsOnTheRealAgent(t *testing.T) {
	need(t)
	t.Parallel()
	cases := []struct {
		name                  string
		faults                []proxyFault
		create, exec, destroy outcome
		// during checks what the fault left, before it is cleared.
		during func(t *testing.T, g *gw)
		// ends is the end reason of the sandbox made before the fault
		// once the loops ran into it; "" when it stays running.
		ends string
	}{
		{
			name:   "Nomad slower than the per-call timeout on every call",
			faults: []proxyFault{{Latency: 4 * time.Second}},
			create: unavailable, exec: unavailable, destroy: unavailable,
		},
		{
			name:   "Nomad answering 500 to every call",
			faults: []proxyFault{{Status: http.StatusInternalServerError, Body: "rpc error: No cluster leader"}},
			create: unavailable, exec: unavailable, destroy: unavailable,
		},
		{
			name:   "Nomad dropping every connection",
			faults: []proxyFault{{Drop: true}},
			create: unavailable, exec: unavailable, destroy: unavailable,
		},
		{
			// Nomad registers the job but its answer is lost, and the purge
			// the gateway then tries is refused: the record fails at once,
			// releasing its budget; the job is an orphan that reconcile
			// purges once Nomad answers again.
			name: "Nomad registering the job but losing the answer, then refusing the purge",
			faults: []proxyFault{
				{Method: http.MethodPut, PathPrefix: "/v1/jobs", LoseAnswer: true},
				{Method: http.MethodDelete, PathPrefix: "/v1/job/", Status: http.StatusInternalServerError, Body: "rpc error: timeout"},
			},
			during: func(t *testing.T, g *gw) {
				var failed map[string]any
				for _, sb := range g.list(t) {
					if sb["state"] == "failed" {
						failed = sb
					}
				}
				if failed == nil || failed["end_reason"] != "register_failed" {
					t.Fatalf("no record failed with register_failed: %v", g.list(t))
				}
				if job := "sandgate-sbx-" + failed["id"].(string); !slices.Contains(g.jobs(t), job) {
					t.Fatalf("the registered job %s is not in Nomad (%v): the fault did not lose an applied registration", job, g.jobs(t))
				}
				if used := g.hostUse(t, sharedNode); used[0] != 1 {
					t.Fatalf("the failed create still holds budget: use %v, one sandbox live", used)
				}
			},
			create: unavailable, exec: succeeds, destroy: unavailable,
		},
		{
			// The destroy's purge takes effect but its answer is lost: the
			// caller is told to retry, and reconcile, which finds the live
			// record without its job, ends it and releases its budget.
			name:   "Nomad purging the job but losing the answer",
			faults: []proxyFault{{Method: http.MethodDelete, PathPrefix: "/v1/job/", LoseAnswer: true}},
			create: succeeds, exec: succeeds, destroy: unavailable, ends: "job_missing",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newNomadProxy(t, suite.server.HTTPAddr)
			g := startGateway(t, gwOptions{NomadAddress: p.url(), NomadTimeout: "2s"})
			before := g.create(t, g.operator, nil)

			p.inject(c.faults...)
			start := time.Now()
			expectAnswer(t, "create", g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, sandboxBody(sharedNode)), c.create)
			if c.during != nil {
				c.during(t, g)
			}
			expectAnswer(t, "exec", g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+before.ID+"/exec", before.Token,
				map[string]any{"argv": []string{"echo", "hi"}}), c.exec)
			expectAnswer(t, "destroy", g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+before.ID, before.Token, nil), c.destroy)
			t.Logf("create, exec and destroy answered within %s", time.Since(start).Round(time.Millisecond))
			time.Sleep(5 * time.Second) // the reaper, reconcile and reclaim loops run into the fault too

			if c.ends == "" {
				if st := g.status(t, before.ID); st["state"] != "running" {
					t.Fatalf("the sandbox made before the fault, whose destroy could not happen: %v", st)
				}
			} else {
				eventually(t, 30*time.Second, "the sandbox made before ends "+c.ends, func() bool {
					st := g.status(t, before.ID)
					return st["state"] == "ended" && st["end_reason"] == c.ends
				})
			}
			p.clear()
			checkConsistent(t, g, "after the fault cleared")
			if c.ends == "" {
				if r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+before.ID, before.Token, nil); r.Status != http.StatusNoContent {
					t.Fatalf("destroy once Nomad answers: %s", r)
				}
			}
			g.laterRequestsSucceed(t, sharedNode)
			checkConsistent(t, g, "after the later requests")
		})
	}
}

// TestNomadCuttingTheExecStreamOnTheRealAgent: the connection that carries
// a running exec is cut. The caller gets 503 nomad_unavailable at once
// (never an exit code the gateway did not see), the sandbox keeps running,
// and the next exec in it succeeds.
func TestNomadCuttingTheExecStreamOnTheRealAgent(t *testing.T) {
	need(t)
	t.Parallel()
	p := newNomadProxy(t, suite.server.HTTPAddr)
	g := startGateway(t, gwOptions{NomadAddress: p.url()})
	sb := g.create(t, g.operator, nil)

	done := g.execAsync(t, sb, "touch /workspace/begun; sleep 60", 90)
	g.waitBegun(t, sb)
	cut := time.Now()
	p.cut()
	r := waitReply(t, done, 30*time.Second, "the exec whose stream was cut")
	t.Logf("the cut exec answered %s after %s", r, time.Since(cut).Round(time.Millisecond))
	expectAnswer(t, "the exec whose stream was cut", r, unavailable)
	if st := g.status(t, sb.ID); st["state"] != "running" {
		t.Fatalf("after a cut exec stream: %v", st)
	}
	if out := g.sh(t, sb.ID, sb.Token, "echo still"); out != "still\n" {
		t.Fatalf("exec after the cut: %q", out)
	}
	if r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+sb.ID, sb.Token, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %s", r)
	}
	checkConsistent(t, g, "after the destroy")
}

// execAsync starts an exec of script and returns where its answer arrives.
func (g *gw) execAsync(t *testing.T, sb apitest.Created, script string, timeoutSeconds int) <-chan apitest.Reply {
	t.Helper()
	body := map[string]any{"argv": []string{"sh", "-c", script}, "timeout_seconds": timeoutSeconds}
	done := make(chan apitest.Reply, 1)
	go func() {
		r, err := g.api(t).Send(apitest.Request{Method: http.MethodPost, Path: "/v1/sandboxes/" + sb.ID + "/exec", Token: sb.Token, Body: body, Context: t.Context()})
		if err != nil {
			r = apitest.Reply{Status: -1, Body: []byte(err.Error())}
		}
		done <- r
	}()
	return done
}

// waitBegun waits until the script of execAsync has touched its mark.
func (g *gw) waitBegun(t *testing.T, sb apitest.Created) {
	t.Helper()
	eventually(t, 20*time.Second, "the long command began", func() bool {
		res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"test", "-f", "/workspace/begun"}})
		return res.code() == 0
	})
}

func waitReply(t *testing.T, done <-chan apitest.Reply, d time.Duration, what string) apitest.Reply {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no answer within %s (it hangs)", what, d)
		return apitest.Reply{}
	}
}

// TestTheNodesAgentCrashingMidExec: the client agent of the sandbox's node
// is killed while a command runs. The exec answers 503 nomad_unavailable
// within bounded time (no made-up exit code). When the agent is back the
// sandbox either runs again (Nomad reattached to its container) or has
// ended lost (Nomad replaced its allocation), and the budget follows.
func TestTheNodesAgentCrashingMidExec(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-exec-crash"
	a, g := ownNode(t, gwNode{Name: node})
	sb := g.create(t, g.operator, sandboxBody(node))

	done := g.execAsync(t, sb, "touch /workspace/begun; sleep 60", 90)
	g.waitBegun(t, sb)
	killed := time.Now()
	a.Kill()
	r := waitReply(t, done, 45*time.Second, "the exec whose node's agent was killed")
	t.Logf("the exec answered %s, %s after the kill", r, time.Since(killed).Round(time.Millisecond))
	expectAnswer(t, "the exec whose node's agent was killed", r, unavailable)

	afterTheAgentComesBack(t, a, g, sb, node)
	g.laterRequestsSucceed(t, node)
}

// afterTheAgentComesBack restarts a killed node agent and requires what
// runsAgainOrEndedLost does.
func afterTheAgentComesBack(t *testing.T, a *agent, g *gw, sb apitest.Created, node string) {
	t.Helper()
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	runsAgainOrEndedLost(t, g, sb, node)
}

// runsAgainOrEndedLost requires the sandbox, whose node's agent is back
// (restarted or resumed), to run again (Nomad reattached to its container)
// or to have ended lost (Nomad replaced its allocation), then destroys it
// if it runs, and requires the records, the budget and the node to agree
// and no container of it to be left.
func runsAgainOrEndedLost(t *testing.T, g *gw, sb apitest.Created, node string) {
	t.Helper()
	var st map[string]any
	eventually(t, 90*time.Second, "the sandbox runs again or has ended lost", func() bool {
		st = g.status(t, sb.ID)
		if st["state"] == "ended" {
			return true
		}
		res := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", sb.Token, map[string]any{"argv": []string{"echo", "back"}})
		return res.Status == http.StatusOK
	})
	t.Logf("after the agent came back: state %v, end_reason %v, last_error %v", st["state"], st["end_reason"], st["last_error"])
	if st["state"] != "ended" {
		r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+sb.ID, sb.Token, nil)
		// The old container may still answer an exec for a moment after
		// the agent is back, until Nomad places the allocation that
		// replaces it; the gateway then ends the sandbox lost and revokes
		// its token, and the destroy is refused.
		if r.Status != http.StatusNoContent {
			if st = g.status(t, sb.ID); st["state"] != "ended" {
				t.Fatalf("destroy after the agent came back: %s", r)
			}
			t.Logf("the destroy after the agent came back was refused (%d) as the sandbox had just ended %v: %v", r.Status, st["end_reason"], st["last_error"])
		}
	}
	if st["state"] == "ended" && st["end_reason"] != "lost" {
		t.Fatalf("a sandbox whose node's agent was down ended %v, want lost: %v", st["end_reason"], st)
	}
	checkConsistentOn(t, g, node, "after the agent came back")
	eventually(t, 60*time.Second, "the sandbox's containers removed", func() bool { return containersOf(sb.ID) == 0 })
	g.waitNodeReady(t, node)
}

// TestAnAllocationThatNeverStartsFailsItsSandbox: the node's agent hangs
// (SIGSTOP). Before a create, the create is refused with 503
// nomad_unavailable (the node's usage cannot be read) and leaves nothing.
// Right after Nomad accepted the job, the allocation is placed and nothing
// starts it: the create answers starting, and the gateway fails the
// sandbox within start_timeout (or when Nomad gives the allocation up as
// lost), purges its job and releases its budget, and its token is refused.
// When the agent resumes, no container of it is left and the node serves
// again.
func TestAnAllocationThatNeverStartsFailsItsSandbox(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-hung"
	p := newNomadProxy(t, suite.server.HTTPAddr)
	a, g := ownNodeWith(t, gwNode{Name: node}, gwOptions{NomadAddress: p.url(), NomadTimeout: "3s", StartTimeout: "8s"})
	t.Cleanup(a.Thaw) // runs before ownNode's stop

	a.Freeze()
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, sandboxBody(node))
	t.Logf("create on a hung node: %s", r)
	expectAnswer(t, "create on a hung node", r, unavailable)
	checkConsistentOn(t, g, node, "after the create on a hung node")
	a.Thaw()
	g.waitNodeReady(t, node)

	id, m := g.createAndThen(t, p, a.Freeze, sandboxBody(node, "wait_seconds", 2), "create whose node hung once Nomad took the job")
	failedOrEnded(t, g, node, id, m, []string{"start_timeout", "placement_failed"})
	a.Thaw()
	eventually(t, 60*time.Second, "no container of the sandbox that never started", func() bool { return containersOf(id) == 0 })
	checkConsistentOn(t, g, node, "after the agent resumed")
	g.waitNodeReady(t, node)
	g.laterRequestsSucceed(t, node)
}

// TestANodeVanishingMidCreate: the node's agent is killed the moment
// Nomad has accepted the sandbox's job, before any allocation runs. The
// sandbox fails (never runs with a dead node), its job is purged and its
// budget released; once the agent is back the node serves again.
func TestANodeVanishingMidCreate(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-vanish"
	p := newNomadProxy(t, suite.server.HTTPAddr)
	a, g := ownNodeWith(t, gwNode{Name: node}, gwOptions{NomadAddress: p.url(), StartTimeout: "20s"})
	id, m := g.createAndThen(t, p, a.Kill, sandboxBody(node, "wait_seconds", 30), "create whose node vanished")
	failedOrEnded(t, g, node, id, m, []string{"start_timeout", "placement_failed", "lost"})
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	g.waitNodeReady(t, node)
	eventually(t, 60*time.Second, "no container of the sandbox whose node vanished", func() bool { return containersOf(id) == 0 })
	checkConsistentOn(t, g, node, "after the agent came back")
	g.laterRequestsSucceed(t, node)
}

// createAndThen creates a sandbox from body and runs fault the moment
// Nomad has accepted its job (the registration's answer passing the proxy
// p), before the gateway sees that answer. The create must answer 201 or
// 202, or, when the sandbox failed while the create waited, a 503 or 429
// placement_failed naming it (sandbox_id); it returns the sandbox's id and
// the answer.
func (g *gw) createAndThen(t *testing.T, p *nomadProxy, fault func(), body map[string]any, what string) (string, map[string]any) {
	t.Helper()
	p.after(func(r *http.Request, resp *http.Response) bool {
		return r.Method == http.MethodPut && r.URL.Path == "/v1/jobs" && resp.StatusCode == http.StatusOK
	}, fault)
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, body)
	t.Logf("%s: %s", what, r)
	switch r.Status {
	case http.StatusCreated, http.StatusAccepted:
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		m := r.JSON(t)
		id, _ := m["sandbox_id"].(string)
		if m["code"] != "placement_failed" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %s", what, r)
		}
		return id, m
	default:
		t.Fatalf("%s: %s", what, r)
	}
	m := r.JSON(t)
	id, _ := m["id"].(string)
	return id, m
}

// failedOrEnded waits until the sandbox created as m has failed or ended
// with one of reasons, saying why, with its budget released and its job
// purged, and its session token refused.
func failedOrEnded(t *testing.T, g *gw, node, id string, m map[string]any, reasons []string) {
	t.Helper()
	if id == "" {
		t.Fatalf("the create answered no id: %v", m)
	}
	if m["state"] == "running" {
		t.Fatalf("a sandbox on a node that cannot start it answered running: %v", m)
	}
	var st map[string]any
	eventually(t, 60*time.Second, "the sandbox fails", func() bool {
		st = g.status(t, id)
		return st["state"] == "failed" || st["state"] == "ended"
	})
	t.Logf("the sandbox: state %v, end_reason %v, last_error %q", st["state"], st["end_reason"], st["last_error"])
	if reason, _ := st["end_reason"].(string); !slices.Contains(reasons, reason) {
		t.Fatalf("end_reason %q, want one of %v: %v", reason, reasons, st)
	}
	if msg, _ := st["last_error"].(string); msg == "" {
		t.Fatalf("a sandbox that never ran does not say why: %v", st)
	}
	if tok, _ := m["token"].(string); tok != "" {
		r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", tok, map[string]any{"argv": []string{"true"}})
		if r.Status < 400 || r.Status >= 500 {
			t.Fatalf("exec with the token of a sandbox that never ran: %s", r)
		}
	}
	if used := g.hostUse(t, node); used != [3]int64{} {
		t.Fatalf("budget use after the failed start: %v", used)
	}
	if jobs := g.jobs(t); len(jobs) != 0 {
		t.Fatalf("jobs left after the failed start: %v", jobs)
	}
}

// waitNodeReady waits until Nomad reports the node ready again, and the
// gateway too: it reads nodes through a cache of a few seconds, and until
// it has seen the node ready it refuses creates on it (P3), as it should.
func (g *gw) waitNodeReady(t *testing.T, name string) {
	t.Helper()
	eventually(t, 90*time.Second, "node "+name+" ready again, in Nomad and in the gateway's view", func() bool {
		nodes, _, err := suite.api.Nodes().List(nil)
		if err != nil {
			return false
		}
		ready := false
		for _, n := range nodes {
			if n.Name == name {
				ready = n.Status == "ready" && n.SchedulingEligibility == "eligible"
			}
		}
		if !ready {
			return false
		}
		r := g.api(t).Do(http.MethodGet, "/v1/hosts", g.operator, nil)
		var hosts struct {
			Hosts []struct {
				Name  string `json:"name"`
				Nomad struct {
					Status      string `json:"status"`
					Eligibility string `json:"eligibility"`
					Drain       bool   `json:"drain"`
				} `json:"nomad"`
			} `json:"hosts"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &hosts) != nil {
			return false
		}
		for _, h := range hosts.Hosts {
			if h.Name == name {
				return h.Nomad.Status == "ready" && h.Nomad.Eligibility == "eligible" && !h.Nomad.Drain
			}
		}
		return false
	})
}

// TestAStreamingExecWhoseNodesAgentIsKilled: the client agent of the
// sandbox's node is killed while a command streams its output (SSE). The
// stream ends with an error event within bounded time, never with an exit
// the gateway did not see, and the gateway and the node recover.
func TestAStreamingExecWhoseNodesAgentIsKilled(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-stream-crash"
	a, g := ownNode(t, gwNode{Name: node})
	sb := g.create(t, g.operator, sandboxBody(node))
	c, err := client.New(client.Config{Addr: g.url, Token: sb.Token})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var (
		transcript []string
		last       client.ExecEvent
		killed     time.Time
	)
	for ev, err := range c.ExecStream(ctx, sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "echo started; sleep 60"}, TimeoutSeconds: new(int64(90))}) {
		if err != nil {
			t.Fatalf("the stream: %v (events %v)", err, transcript)
		}
		transcript = append(transcript, ev.Event+" "+string(ev.Data))
		if ev.Event == client.EventStdout && killed.IsZero() {
			killed = time.Now()
			a.Kill()
		}
		last = ev
	}
	t.Logf("the stream whose node's agent was killed, %s after the kill:\n%s", time.Since(killed).Round(time.Millisecond), strings.Join(transcript, "\n"))
	if killed.IsZero() || last.Error == nil || (last.Error.Code != "nomad_unavailable" && last.Error.Code != "sandbox_lost") {
		t.Fatalf("the stream ended with %s %s", last.Event, last.Data)
	}
	if took := time.Since(killed); took > 45*time.Second {
		t.Fatalf("the stream ended %s after the kill", took)
	}
	afterTheAgentComesBack(t, a, g, sb, node)
}

// TestAStreamingExecWhoseNodesAgentGoesSilent: the client agent of the
// sandbox's node hangs (SIGSTOP) while a command streams its output (SSE):
// it holds the exec's connection and says nothing more. The gateway cannot
// know what became of the command, so the stream ends with exactly one
// terminal event, an error with code timeout ("no exit status arrived
// within the timeout and the grace after it"), never an exit, at the
// latest the exec's timeout, the wrapper's kill delay and the gateway's
// grace after the stream began; and once the agent resumes the gateway
// and the node recover.
func TestAStreamingExecWhoseNodesAgentGoesSilent(t *testing.T) {
	need(t)
	t.Parallel()
	const (
		node    = "worker-stream-silent"
		timeout = 5 * time.Second
		// The gateway's bound on a stream: its timeout, the wrapper's kill
		// delay (gateway/route_exec.go killAfter) and ExecGrace (default 10 s).
		bound = timeout + 5*time.Second + 10*time.Second
	)
	a, g := ownNode(t, gwNode{Name: node})
	t.Cleanup(a.Thaw) // runs before ownNode's stop, even on a failure
	sb := g.create(t, g.operator, sandboxBody(node))

	ctx, cancel := context.WithTimeout(t.Context(), bound+time.Minute)
	defer cancel()
	var frozen time.Time
	events, closed := g.streamExec(ctx, t, sb, map[string]any{
		"argv": []string{"sh", "-c", "echo started; sleep 60"}, "timeout_seconds": int(timeout / time.Second),
	}, func(ev sseEvent) {
		if ev.event == "stdout" && frozen.IsZero() {
			frozen = time.Now()
			a.Freeze()
		}
	})
	a.Thaw()
	transcript := make([]string, len(events))
	for i, ev := range events {
		transcript[i] = ev.String()
	}
	if frozen.IsZero() || len(events) == 0 {
		t.Fatalf("the agent was never frozen: no stdout event in\n%s", strings.Join(transcript, "\n"))
	}
	began, last := events[0].at, events[len(events)-1]
	t.Logf("the stream whose node's agent went silent ended %s after the freeze, %s after it began (bound %s), and closed %s after its last event:\n%s",
		last.at.Sub(frozen).Round(time.Millisecond), last.at.Sub(began).Round(time.Millisecond), bound,
		closed.Sub(last.at).Round(time.Millisecond), strings.Join(transcript, "\n"))
	if events[0].event != "start" {
		t.Fatalf("the stream did not begin with start: %s", events[0])
	}
	terminals := 0
	for _, ev := range events {
		if ev.event == "exit" {
			t.Fatalf("an exit through a silent agent, which reported none: %s", ev)
		}
		if ev.terminal() {
			terminals++
		}
	}
	if terminals != 1 || !last.terminal() {
		t.Fatalf("want exactly one terminal event, last; got %d, last %s", terminals, last)
	}
	// The sandbox's record stays running while its node is down (it may
	// come back), so nothing ended it meanwhile: not sandbox_lost.
	if last.code() != "timeout" {
		t.Fatalf("the stream of a silent agent ended with %s, want an error with code timeout (sandbox state now %v)", last, g.status(t, sb.ID)["state"])
	}
	// One second for the gateway's own work after the deadline (a store
	// read) and the loaded machine.
	if took := last.at.Sub(began); took > bound+time.Second {
		t.Fatalf("the stream ended %s after it began, past the bound of %s", took, bound)
	}
	if took := closed.Sub(last.at); took > time.Second {
		t.Fatalf("the stream stayed open %s after its terminal event", took)
	}
	runsAgainOrEndedLost(t, g, sb, node)
	g.laterRequestsSucceed(t, node)
}
