package faults

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
	"sandgate/store"
)

// streamInFlight starts a streaming exec of a quiet command and returns
// its events as they come; it returns once the command runs in Nomad.
func streamInFlight(t *testing.T, g *gw, sb apitest.Created) <-chan client.ExecEvent {
	t.Helper()
	g.sim.ResetRequests()
	events := make(chan client.ExecEvent, 64)
	go func() {
		defer close(events)
		for ev, err := range g.client(sb.Token).ExecStream(context.Background(), sb.ID, client.ExecRequest{Argv: []string{"sleep", "5"}, TimeoutSeconds: new(int64(10))}) {
			if err != nil {
				events <- client.ExecEvent{Event: "client-error", Data: []byte(err.Error())}
				return
			}
			events <- ev
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if slices.ContainsFunc(g.sim.RequestLog(), func(l string) bool { return strings.HasSuffix(l, "/exec") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the streaming exec never reached Nomad")
		}
	}
	time.Sleep(100 * time.Millisecond) // the command runs
	return events
}

// terminal waits for the stream's last event.
func terminal(t *testing.T, what string, events <-chan client.ExecEvent) client.ExecEvent {
	t.Helper()
	var last client.ExecEvent
	timeout := time.After(6 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return last
			}
			if ev.Event == client.EventExit {
				t.Fatalf("%s: the stream ended with an exit it cannot have seen: %s", what, ev.Data)
			}
			last = ev
		case <-timeout:
			t.Fatalf("%s: the stream did not end within 6 s", what)
		}
	}
}

// A streaming exec whose Nomad side breaks ends with a typed error event
// within a bounded time, never with an exit event: the exec stream cut
// while the agent stays up, the agent crashing, the sandbox's node going
// down. The sandbox stays running, and later requests work.
func TestAStreamingExecEndsWithATypedErrorWhenNomadFailsMidStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(g *gw)
		heal  func(g *gw)
	}{
		{"the exec stream cut", func(g *gw) { g.agentNet.cut() }, func(*gw) {}},
		{"the agent crashing", func(g *gw) { g.agentNet.crash() }, func(g *gw) { g.agentNet.restart() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			g := startGateway(t, options{})
			sb := g.create()
			events := streamInFlight(t, g, sb)
			tc.fault(g)
			last := terminal(t, tc.name, events)
			if last.Event != client.EventError || last.Error == nil || last.Error.Code != "nomad_unavailable" {
				t.Fatalf("%s: the stream ended with %s %s", tc.name, last.Event, last.Data)
			}
			tc.heal(g)
			g.waitNothingLeft("after " + tc.name)
			if rec, err := g.store.Get(ctx, sb.ID); err != nil || rec.State != store.StateRunning {
				t.Fatalf("the sandbox after %s: %v %s", tc.name, err, rec.State)
			}
			if res, err := g.client(sb.Token).Exec(ctx, sb.ID, echoCommand); err != nil || res.Stdout != "hi\n" {
				t.Fatalf("the next exec: %v %+v", err, res)
			}
		})
	}
}

// A streaming exec whose Nomad side goes silent (every byte held, the
// connection open) ends with a timeout error event once the timeout, the
// wrapper's kill delay and the grace have passed, never with an exit.
func TestAStreamingExecWhoseNomadGoesSilentEndsWithTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := startGateway(t, options{})
	sb := g.create()
	events := make(chan client.ExecEvent, 64)
	go func() {
		defer close(events)
		for ev, err := range g.client(sb.Token).ExecStream(context.Background(), sb.ID, client.ExecRequest{Argv: []string{"sh", "-c", "echo started; sleep 30"}, TimeoutSeconds: new(int64(1))}) {
			if err != nil {
				events <- client.ExecEvent{Event: "client-error", Data: []byte(err.Error())}
				return
			}
			events <- ev
		}
	}()
	// Silence falls once the command's first output is through: the exec
	// handshake is then complete (frozen during the handshake, the stream
	// fails at the handshake timeout instead: nomad_unavailable, as it
	// should, but that is not this test).
	for started := false; !started; {
		select {
		case ev, ok := <-events:
			if !ok || ev.Event == "client-error" || ev.Event == client.EventExit || ev.Event == client.EventError {
				t.Fatalf("the stream ended before its command printed: %s %s", ev.Event, ev.Data)
			}
			started = ev.Event == client.EventStdout
		case <-time.After(10 * time.Second):
			t.Fatal("the streaming exec printed nothing within 10 s")
		}
	}
	g.agentNet.freeze()
	silent := time.Now()
	var last client.ExecEvent
	for done := false; !done; {
		select {
		case ev, ok := <-events:
			if !ok {
				done = true
				break
			}
			if ev.Event == client.EventExit {
				t.Fatalf("an exit through a silent Nomad: %s", ev.Data)
			}
			last = ev
		case <-time.After(20 * time.Second):
			t.Fatal("the stream of a silent Nomad did not end within 20 s")
		}
	}
	g.agentNet.thaw()
	// timeout 1 s + the wrapper's 5 s + the test gateway's 1 s grace.
	if last.Error == nil || last.Error.Code != "timeout" {
		t.Fatalf("the stream of a silent Nomad ended with %s %s", last.Event, last.Data)
	}
	if took := time.Since(silent); took > 9*time.Second {
		t.Fatalf("the stream of a silent Nomad ended %s after it went silent, want about 7 s", took)
	}
	t.Logf("a silent Nomad: %s %s, %s after it went silent", last.Event, last.Data, time.Since(silent).Round(100*time.Millisecond))
	g.waitNothingLeft("after the silence")
	if res, err := g.client(sb.Token).Exec(ctx, sb.ID, echoCommand); err != nil || res.Stdout != "hi\n" {
		t.Fatalf("the next exec: %v %+v", err, res)
	}
}
