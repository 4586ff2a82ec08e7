package faults

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
)

var (
	nomadDown   = want{http.StatusServiceUnavailable, client.CodeNomadUnavailable}
	notRunning  = want{http.StatusConflict, client.CodeSandboxNotRunning}
	revoked     = want{http.StatusUnauthorized, client.CodeUnauthenticated}
	echoCommand = client.ExecRequest{Argv: []string{"echo", "hi"}}
)

// TestNomadFailingEveryCallOrSomeGivesAClearErrorAndLeavesNothingBehind:
// with a sandbox made before the fault, each fault is met by a create, an
// exec in that sandbox and its destroy, while the gateway's loops keep
// running into the fault too. The answers are problem documents; the
// sandbox made before stays running as long as its destroy could not
// happen; and once the fault is cleared the loops leave nothing behind.
func TestNomadFailingEveryCallOrSomeGivesAClearErrorAndLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		inject func(*gw)
		// during checks the state the fault left, before it is cleared.
		during                func(*testing.T, *gw)
		create, exec, destroy want
		// ends is the end reason of the sandbox made before the fault once
		// the loops ran into it: "" when it stays running, "destroyed" when
		// its destroy answered.
		ends string
	}{
		{
			name:   "Nomad slower than the gateway's per-call timeout on every call",
			inject: func(g *gw) { g.sim.InjectFault(nomadsim.Fault{Latency: slow}) },
			create: nomadDown, exec: nomadDown, destroy: nomadDown,
		},
		{
			name: "Nomad answering 500 to every call",
			inject: func(g *gw) {
				g.sim.InjectFault(nomadsim.Fault{Status: http.StatusInternalServerError, Body: "rpc error: No cluster leader"})
			},
			create: nomadDown, exec: nomadDown, destroy: nomadDown,
		},
		{
			name:   "Nomad dropping every connection",
			inject: func(g *gw) { g.sim.InjectFault(nomadsim.Fault{Drop: true}) },
			create: nomadDown, exec: nomadDown, destroy: nomadDown,
		},
		{
			name: "Nomad slower than the per-call timeout while the new sandbox is placed",
			inject: func(g *gw) {
				g.sim.InjectFault(nomadsim.Fault{Method: http.MethodGet, PathPrefix: "/v1/evaluation/", Latency: slow})
			},
			create: nomadDown, exec: ok, destroy: ok, ends: "destroyed",
		},
		{
			// The answer is lost after Nomad registered the job, and the
			// purge the gateway then tries is refused: the record fails and
			// releases its budget at once; the job is an orphan that only
			// reconciliation, once Nomad answers again, can purge.
			name: "Nomad registering the job but losing the answer, then refusing the purge",
			inject: func(g *gw) {
				g.faults.loseAnswers(http.MethodPut, "/v1/jobs")
				g.sim.InjectFault(nomadsim.Fault{Method: http.MethodDelete, PathPrefix: "/v1/job/", Status: http.StatusInternalServerError})
			},
			during: func(t *testing.T, g *gw) {
				failed, err := g.store.List(t.Context(), store.Filter{Principal: "agent:faults-agent"})
				if err != nil {
					t.Fatal(err)
				}
				n := slices.IndexFunc(failed, func(r store.Sandbox) bool { return r.State == store.StateFailed })
				if n < 0 || failed[n].EndReason != "register_failed" {
					t.Fatalf("no record failed with register_failed: %+v", failed)
				}
				if jobs := g.sandboxJobs(); !slices.Contains(jobs, failed[n].JobID) {
					t.Fatalf("the registered job %s is not in Nomad (%v): the fault did not lose an applied registration", failed[n].JobID, jobs)
				}
			},
			create: nomadDown, exec: ok, destroy: nomadDown,
		},
		{
			// The destroy's purge takes effect but its answer is lost: the
			// caller is told to retry, and reconciliation, which finds the
			// live record without its job, ends it and releases its budget.
			name:   "Nomad purging the job but losing the answer",
			inject: func(g *gw) { g.faults.loseAnswers(http.MethodDelete, "/v1/job/") },
			create: ok, exec: ok, destroy: nomadDown, ends: "job_missing",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			g := startGateway(t, options{})
			before := g.create()
			session := g.client(before.Token)
			c.inject(g)
			_, err := g.agent.CreateSandbox(ctx, createRequest())
			expect(t, "create", err, c.create)
			if c.during != nil {
				c.during(t, g)
			}
			_, err = session.Exec(ctx, before.ID, echoCommand)
			expect(t, "exec", err, c.exec)
			err = session.DestroySandbox(ctx, before.ID)
			expect(t, "destroy", err, c.destroy)
			time.Sleep(5 * loopInterval) // the loops run into the fault too
			if c.ends == "" {
				if rec, err := g.store.Get(ctx, before.ID); err != nil || rec.State != store.StateRunning {
					t.Fatalf("the sandbox made before the fault, whose destroy failed: %v %s %q", err, rec.State, rec.EndReason)
				}
			} else {
				g.waitRecord(before.ID, "ended "+c.ends, func(r store.Sandbox) bool { return r.State == store.StateEnded && r.EndReason == c.ends })
			}
			g.clearFaults()
			g.waitNothingLeft("after the fault cleared")
			if err := session.DestroySandbox(ctx, before.ID); c.ends == "" && err != nil {
				t.Fatalf("destroy once Nomad answers: %v", err)
			}
			g.laterRequestsSucceed(ctx)
		})
	}
}

// TestANodeGoingDownWhileASandboxIsPlacedFailsIt: the node the job is
// pinned to goes down between the registration and the allocation's
// start. The create answers 503 placement_failed (never a 201), saying
// why, with Retry-After and no session token; the sandbox failed, its job
// is purged and its budget released.
func TestANodeGoingDownWhileASandboxIsPlacedFailsIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{runDelay: 500 * time.Millisecond})
	type answer struct {
		sb  client.Sandbox
		err error
	}
	done := make(chan answer, 1)
	go func() {
		sb, err := g.agent.CreateSandbox(ctx, createRequest())
		done <- answer{sb, err}
	}()
	var a answer
	for deadline := time.Now().Add(10 * time.Second); len(g.sandboxJobs()) == 0; time.Sleep(5 * time.Millisecond) {
		select {
		case a = <-done:
			t.Fatalf("the create answered before its job was seen: %v %+v", a.err, a.sb)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was never registered")
		}
	}
	if err := g.sim.SetNodeStatus(node, "down"); err != nil {
		t.Fatal(err)
	}
	a = <-done
	var p *client.Problem
	if !errors.As(a.err, &p) || p.Status != http.StatusServiceUnavailable || p.Code != client.CodePlacementFailed ||
		p.RetryAfter <= 0 || p.Detail == "" || p.SandboxID == "" || a.sb.Token != "" {
		t.Fatalf("a sandbox whose node went down while it was placed: %v %+v", a.err, a.sb)
	}
	t.Logf("problem: %v", p)
	rec := g.waitRecord(p.SandboxID, "failed", func(r store.Sandbox) bool { return r.State == store.StateFailed })
	if rec.EndReason != "placement_failed" || rec.LastError == "" {
		t.Fatalf("record: %+v", rec)
	}
	g.waitNothingLeft("after the failed start")
	if err := g.sim.SetNodeStatus(node, "ready"); err != nil {
		t.Fatal(err)
	}
	g.laterRequestsSucceed(ctx)
}

// TestAnAllocationThatNeverRunsFailsAtTheStartTimeout: Nomad places the
// allocation but never reports it running (an image pull that hangs). The
// create answers 201 starting once its wait is over; exec is refused with
// 409 while it starts; at the start timeout the sandbox fails
// (start_timeout), its job is purged, its budget released and its token
// revoked.
func TestAnAllocationThatNeverRunsFailsAtTheStartTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{startTimeout: 2 * time.Second})
	g.faults.neverRun()
	wait := int64(1)
	req := createRequest()
	req.WaitSeconds = &wait
	sb, err := g.agent.CreateSandbox(ctx, req)
	if err != nil || sb.State != client.StateStarting || sb.Token == "" {
		t.Fatalf("create: %v %+v", err, sb)
	}
	session := g.client(sb.Token)
	_, err = session.Exec(ctx, sb.ID, echoCommand)
	expect(t, "exec while starting", err, notRunning)
	rec := g.waitRecord(sb.ID, "failed at the start timeout", func(r store.Sandbox) bool { return r.State == store.StateFailed })
	if rec.EndReason != "start_timeout" || rec.LastError == "" {
		t.Fatalf("the failed start: %s %s %q", rec.State, rec.EndReason, rec.LastError)
	}
	g.waitNothingLeft("after the start timeout")
	_, err = session.GetSandbox(ctx, sb.ID)
	expect(t, "the session token after the failed start", err, revoked)
	got, err := g.operator.GetSandbox(ctx, sb.ID)
	if err != nil || got.State != client.StateFailed || got.EndReason != "start_timeout" {
		t.Fatalf("the operator's view: %v %+v", err, got)
	}
	g.clearFaults()
	g.laterRequestsSucceed(ctx)
}

// execInFlight starts a long command in sb and waits until the simulator
// has the exec stream; the channel delivers the exec's error.
func execInFlight(t *testing.T, g *gw, sb apitest.Created) <-chan error {
	t.Helper()
	g.sim.ResetRequests()
	done := make(chan error, 1)
	go func() {
		_, err := g.client(sb.Token).Exec(context.Background(), sb.ID, client.ExecRequest{Argv: []string{"sleep", "5"}, TimeoutSeconds: new(int64(10))})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if slices.ContainsFunc(g.sim.RequestLog(), func(l string) bool { return strings.HasSuffix(l, "/exec") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never reached Nomad")
		}
	}
	time.Sleep(100 * time.Millisecond) // the command runs
	return done
}

// TestTheNomadAgentCrashingMidExec: the agent the gateway talks to dies
// while a command runs (every connection cut, new ones closed). The exec
// answers 503, as do a create and a destroy while the agent is down; the
// sandbox stays running with its budget; once the agent is back, exec and
// destroy work again.
func TestTheNomadAgentCrashingMidExec(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	sb := g.create()
	session := g.client(sb.Token)
	done := execInFlight(t, g, sb)
	g.agentNet.crash()
	select {
	case err := <-done:
		expect(t, "exec when the agent crashed", err, nomadDown)
	case <-time.After(4 * time.Second):
		t.Fatal("the exec did not answer when the agent crashed (it waited for the command)")
	}
	_, err := g.agent.CreateSandbox(ctx, createRequest())
	expect(t, "create while the agent is down", err, nomadDown)
	expect(t, "destroy while the agent is down", session.DestroySandbox(ctx, sb.ID), nomadDown)
	time.Sleep(5 * loopInterval)
	if rec, err := g.store.Get(ctx, sb.ID); err != nil || rec.State != store.StateRunning {
		t.Fatalf("the sandbox while the agent is down: %v %s %s", err, rec.State, rec.EndReason)
	}
	g.agentNet.restart()
	g.waitNothingLeft("once the agent is back")
	if res, err := session.Exec(ctx, sb.ID, echoCommand); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("exec once the agent is back: %v %+v", err, res)
	}
	if err := session.DestroySandbox(ctx, sb.ID); err != nil {
		t.Fatalf("destroy once the agent is back: %v", err)
	}
	g.laterRequestsSucceed(ctx)
}

// TestAnExecStreamBrokenWithoutAnExitCodeIs503AndTheSandboxStays: the
// exec's connection breaks while the agent stays up (as a 1.6 agent's
// exec WebSocket did when it panicked, upstream issue 19506). The exec
// answers 503, never an exit code; the sandbox, whose allocation still
// runs, is unchanged and the next exec works.
func TestAnExecStreamBrokenWithoutAnExitCodeIs503AndTheSandboxStays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	sb := g.create()
	done := execInFlight(t, g, sb)
	g.agentNet.cut()
	select {
	case err := <-done:
		expect(t, "exec whose stream broke", err, nomadDown)
	case <-time.After(4 * time.Second):
		t.Fatal("the exec did not answer when its stream broke")
	}
	g.waitNothingLeft("after the broken stream")
	if rec, err := g.store.Get(ctx, sb.ID); err != nil || rec.State != store.StateRunning {
		t.Fatalf("the sandbox after the broken stream: %v %s %s", err, rec.State, rec.EndReason)
	}
	if res, err := g.client(sb.Token).Exec(ctx, sb.ID, echoCommand); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("the next exec: %v %+v", err, res)
	}
	g.laterRequestsSucceed(ctx)
}

// TestTheNodesClientCrashingMidExec: the client agent of the sandbox's node
// dies while a command runs (Nomad marks the node down). The exec answers
// 503 naming the node, and the sandbox stays (its node may come back with
// it); when the node returns Nomad replaces the allocation by an empty one,
// and the allocation watch ends the sandbox (lost), releasing its budget.
func TestTheNodesClientCrashingMidExec(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	sb := g.create()
	done := execInFlight(t, g, sb)
	if err := g.sim.SetNodeStatus(node, "down"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		expect(t, "exec when the node's client crashed", err, nomadDown)
		if !strings.Contains(err.Error(), node) {
			t.Fatalf("the 503 does not name the node: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the exec did not answer when the node's client crashed")
	}
	time.Sleep(5 * loopInterval)
	if rec, err := g.store.Get(ctx, sb.ID); err != nil || rec.State != store.StateRunning {
		t.Fatalf("the sandbox while its node is down: %v %s %s", err, rec.State, rec.EndReason)
	}
	if err := g.sim.SetNodeStatus(node, "ready"); err != nil {
		t.Fatal(err)
	}
	g.waitRecord(sb.ID, "ended lost once the node is back", func(r store.Sandbox) bool {
		return r.State == store.StateEnded && r.EndReason == "lost"
	})
	g.waitNothingLeft("once the node is back")
	g.laterRequestsSucceed(ctx)
}

// TestTheReaperEndsAnExpiredSandboxOnceNomadPurgesAgain: while Nomad
// refuses the purge, an expired sandbox stays live and keeps its budget
// (nothing is half done); the reaper's next pass after Nomad recovers ends
// it.
func TestTheReaperEndsAnExpiredSandboxOnceNomadPurgesAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	req := createRequest()
	req.TTLSeconds = new(int64(60))
	sb, err := g.agent.CreateSandbox(ctx, req)
	if err != nil || sb.State != client.StateRunning {
		t.Fatalf("create: %v %+v", err, sb)
	}
	g.sim.InjectFault(nomadsim.Fault{Method: http.MethodDelete, PathPrefix: "/v1/job/", Status: http.StatusInternalServerError})
	g.clock.advance(2 * time.Minute)
	time.Sleep(5 * loopInterval)
	if rec, err := g.store.Get(ctx, sb.ID); err != nil || rec.State != store.StateRunning {
		t.Fatalf("the expired sandbox while Nomad refuses the purge: %v %s %s", err, rec.State, rec.EndReason)
	}
	if err := g.nothingLeft(); err != nil {
		t.Fatalf("while Nomad refuses the purge: %v", err)
	}
	g.clearFaults()
	g.waitRecord(sb.ID, "ended expired once Nomad purges again", func(r store.Sandbox) bool {
		return r.State == store.StateEnded && r.EndReason == "expired"
	})
	g.waitNothingLeft("once Nomad purges again")
	g.laterRequestsSucceed(ctx)
}

// TestTheCauseOfA503IsLogged: the problem document names no internals,
// and the gateway's log line for the request carries what Nomad said
// (problem.go: "the cause is logged, never shown").
func TestTheCauseOfA503IsLogged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	g.sim.InjectFault(nomadsim.Fault{Method: http.MethodPut, PathPrefix: "/v1/jobs", Status: http.StatusInternalServerError, Body: "rpc error: No cluster leader"})
	_, err := g.agent.CreateSandbox(ctx, createRequest())
	expect(t, "create", err, nomadDown)
	var p *client.Problem
	if !errors.As(err, &p) || p.RequestID == "" {
		t.Fatalf("no request id: %v", err)
	}
	if strings.Contains(p.Detail, "leader") {
		t.Fatalf("the problem shows Nomad's message: %s", p.Detail)
	}
	for line := range strings.SplitSeq(g.logs.String(), "\n") {
		if strings.Contains(line, `msg="request failed"`) && strings.Contains(line, p.RequestID) {
			if !strings.Contains(line, "No cluster leader") {
				t.Fatalf("the log line of the failed request lacks Nomad's answer:\n%s", line)
			}
			return
		}
	}
	t.Fatalf("no log line for request %s:\n%s", p.RequestID, g.logs.String())
}

// TestConcurrentCreatesOnASlowNomadEachWaitAboutOneTimeout: while Nomad's
// node listing is slower than the per-call timeout, creates that arrive
// together each answer 503 after about one timeout, not one timeout per
// create ahead of them.
//
// Before the node cache shared one listing among its waiters it held its
// mutex across the Nomad calls, and the fifth of five creates answered
// after five timeouts (measured 3, 6, 9, 12, 15 s).
func TestConcurrentCreatesOnASlowNomadEachWaitAboutOneTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	g.sim.InjectFault(nomadsim.Fault{Method: http.MethodGet, PathPrefix: "/v1/nodes", Latency: slow})
	g.clock.advance(time.Minute) // the node cache is stale
	const creates = 5
	type answer struct {
		err  error
		took time.Duration
	}
	start := time.Now()
	answers := make(chan answer, creates)
	for range creates {
		go func() {
			_, err := g.agent.CreateSandbox(ctx, createRequest())
			answers <- answer{err, time.Since(start)}
		}()
	}
	for range creates {
		a := <-answers
		expect(t, "create while the node listing is slow", a.err, nomadDown)
		// One shared listing fails after one timeout; a caller that joined it
		// tries once more with its own, so two timeouts and some slack, never
		// one per create ahead of it.
		if a.took > 2*nomadTimeout+nomadTimeout/2 {
			t.Errorf("a create answered after %s: more than two per-call timeouts (%s)", a.took.Round(time.Millisecond), nomadTimeout)
		}
	}
	g.clearFaults()
	g.waitNothingLeft("after the slow listing")
	g.laterRequestsSucceed(ctx)
}
