package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/gateway/token"
)

// streamOf runs a streaming exec with tok and returns every event.
func streamOf(t *testing.T, h *harness, tok, id string, req client.ExecRequest) ([]client.ExecEvent, error) {
	t.Helper()
	c, err := client.New(client.Config{Addr: h.url, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var events []client.ExecEvent
	for ev, err := range c.ExecStream(ctx, id, req) {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// output joins the stdout or stderr events' bytes.
func output(events []client.ExecEvent, stream string) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Event == stream {
			b.Write(ev.Output)
		}
	}
	return b.String()
}

// checkSequence holds what every stream must be: ids 1, 2, 3 ..., start
// first, one terminal event, last.
func checkSequence(t *testing.T, events []client.ExecEvent) client.ExecEvent {
	t.Helper()
	if len(events) < 2 || events[0].Event != client.EventStart {
		t.Fatalf("a stream must start with start: %+v", events)
	}
	for i, ev := range events {
		if ev.ID != i+1 {
			t.Fatalf("event %d has id %d", i+1, ev.ID)
		}
		terminal := ev.Event == client.EventExit || ev.Event == client.EventError
		if terminal != (i == len(events)-1) {
			t.Fatalf("event %d (%s): exactly one terminal event, last", i+1, ev.Event)
		}
	}
	return events[len(events)-1]
}

// A streaming exec sends the output as it comes, keepalives while the
// command is quiet, base64 where the bytes are not UTF-8, and one exit
// event with the status Nomad reported.
func TestAStreamingExecSendsOutputKeepalivesAndOneExit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{keepalive: 150 * time.Millisecond})
	id, session := h.gw.Create(h.operator, nil).IDToken()

	events, err := streamOf(t, h, session, id, client.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	last := checkSequence(t, events)
	if last.Exit == nil || last.Exit.ExitCode != 3 || last.Exit.TimedOut || output(events, "stdout") != "out\n" || output(events, "stderr") != "err\n" {
		t.Fatalf("events: %+v", events)
	}
	if last.Exit.StdoutBytes != 4 || last.Exit.StderrBytes != 4 {
		t.Fatalf("exit: %+v", last.Exit)
	}

	// A quiet command gets keepalives, and is not cut off.
	events, err = streamOf(t, h, session, id, client.ExecRequest{Argv: []string{"sleep", "1"}})
	if err != nil {
		t.Fatal(err)
	}
	keepalives := 0
	for _, ev := range events {
		if ev.Event == client.EventKeepalive {
			keepalives++
		}
	}
	if last := checkSequence(t, events); last.Exit == nil || last.Exit.ExitCode != 0 || keepalives < 3 {
		t.Fatalf("a quiet second: %d keepalives, %+v", keepalives, events)
	}

	// Bytes that are not UTF-8 come as base64, exactly.
	events, err = streamOf(t, h, session, id, client.ExecRequest{Argv: []string{"cat"}, StdinBase64: ptrTo("//4AYQ==")})
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, events)
	if got := output(events, "stdout"); got != "\xff\xfe\x00a" {
		t.Fatalf("binary output %q", got)
	}
	for _, ev := range events {
		if ev.Event == client.EventStdout && !strings.Contains(string(ev.Data), `"encoding":"base64"`) {
			t.Fatalf("a binary chunk not in base64: %s", ev.Data)
		}
	}

	// The output cap holds; the exit says what was cut.
	events, err = streamOf(t, h, session, id, client.ExecRequest{Argv: []string{"yes"}, MaxOutputBytes: new(int64(10))})
	if err != nil {
		t.Fatal(err)
	}
	last = checkSequence(t, events)
	if got := output(events, "stdout"); len(got) != 10 || last.Exit == nil || !last.Exit.StdoutTruncated || last.Exit.StdoutBytes <= 10 {
		t.Fatalf("capped output %q, exit %+v", got, last.Exit)
	}

	// The policy decides the stream as it decides the JSON form.
	agent := h.mint(token.RoleAgent, "other")
	if _, err := streamOf(t, h, agent, id, client.ExecRequest{Argv: []string{"true"}}); !isProblem(err, http.StatusForbidden, "T2") {
		t.Fatalf("another agent's stream: %v", err)
	}
	if _, err := streamOf(t, h, session, id, client.ExecRequest{Argv: []string{"-rf"}}); !isProblem(err, http.StatusForbidden, "E1") {
		t.Fatalf("an option as the program: %v", err)
	}
}

// A sandbox destroyed while a command streams ends the stream with an
// error event (sandbox_lost), never an exit the gateway did not see.
func TestAStreamEndsWithSandboxLostWhenItsSandboxIsDestroyed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{keepalive: 100 * time.Millisecond})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	c, err := client.New(client.Config{Addr: h.url, Token: session})
	if err != nil {
		t.Fatal(err)
	}
	var events []client.ExecEvent
	destroyed := false
	start := time.Now()
	for ev, err := range c.ExecStream(t.Context(), id, client.ExecRequest{Argv: []string{"sleep", "60"}, TimeoutSeconds: new(int64(90))}) {
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, ev)
		if ev.Event == client.EventKeepalive && !destroyed {
			destroyed = true
			if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusNoContent {
				t.Fatalf("destroy mid-stream: %d %s", r.Status, r.Body)
			}
		}
	}
	last := checkSequence(t, events)
	if last.Error == nil || last.Error.Code != "sandbox_lost" {
		t.Fatalf("the stream of a destroyed sandbox ended with %+v", last)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the stream took %s to end after the destroy", took)
	}
	t.Logf("terminal event: %s %s", last.Event, last.Data)
}

func isProblem(err error, status int, rule string) bool {
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != status {
		return false
	}
	for _, id := range p.RuleIDs {
		if id == rule {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
