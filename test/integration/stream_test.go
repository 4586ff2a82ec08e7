package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/test/testbin"
)

// A streaming exec over HTTP, against the binary (on the simulator, and
// through test/e2e on the real agent): the output as it comes and one
// exit; then a sandbox destroyed mid-stream ends its stream with an error
// event, sandbox_lost, never an exit.
func TestAStreamingExecOverHTTP(t *testing.T) {
	bin, data := testbin.Build(t), t.TempDir()
	agent := mintAgent(t, bin, data, "agent-stream")
	g := startGateway(t, bin, data)
	id, session := g.runningSandbox(t, agent)
	c, err := client.New(client.Config{Addr: g.url, Token: session})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var out strings.Builder
	var transcript []string
	var last client.ExecEvent
	for ev, err := range c.ExecStream(ctx, id, client.ExecRequest{Argv: []string{"sh", "-c", "echo one; sleep 1; echo two; exit 4"}}) {
		if err != nil {
			t.Fatal(err)
		}
		transcript = append(transcript, ev.Event+" "+string(ev.Data))
		if ev.Event == client.EventStdout {
			out.Write(ev.Output)
		}
		last = ev
	}
	if last.Exit == nil || last.Exit.ExitCode != 4 || out.String() != "one\ntwo\n" {
		t.Fatalf("the stream: %q\n%s", out.String(), strings.Join(transcript, "\n"))
	}
	t.Logf("an SSE exec, as the client read it:\n%s", strings.Join(transcript, "\n"))

	// A caller that goes away mid-stream ends the command's process tree.
	// Processes are listed from /proc with sh, tr and grep (both images).
	list := []string{"sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\000' ' ' < "$f" 2>/dev/null; echo; done | grep -c '^sleep 6[12]' || true`}
	running := func() string {
		r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": list})
		if r.Status != http.StatusOK {
			t.Fatalf("listing processes: %d %s", r.Status, r.Body)
		}
		return strings.TrimSpace(r.JSON(t)["stdout"].(string))
	}
	sctx, stop := context.WithCancel(ctx)
	for ev, err := range c.ExecStream(sctx, id, client.ExecRequest{Argv: []string{"sh", "-c", "sleep 61 & echo started; sleep 62; wait"}, TimeoutSeconds: new(int64(90))}) {
		if err != nil {
			t.Fatalf("the stream before the disconnect: %v", err)
		}
		if ev.Event == client.EventStdout {
			if g.real {
				if n := running(); n != "2" {
					t.Fatalf("the streamed command's two sleeps are not listed while it runs: %q", n)
				}
			}
			stop() // the caller goes away
			break
		}
	}
	stop()
	if g.real {
		deadline := time.Now().Add(30 * time.Second)
		for running() != "0" {
			if time.Now().After(deadline) {
				t.Fatal("the disconnected stream's processes still run 30 s later")
			}
			time.Sleep(time.Second)
		}
	}
	if r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"echo", "after"}}); r.Status != http.StatusOK {
		t.Fatalf("an exec after the disconnect: %d %s", r.Status, r.Body)
	}

	destroyed := false
	start := time.Now()
	for ev, err := range c.ExecStream(ctx, id, client.ExecRequest{Argv: []string{"sh", "-c", "echo started; sleep 60"}, TimeoutSeconds: new(int64(90))}) {
		if err != nil {
			t.Fatalf("the stream of a sandbox destroyed mid-stream: %v", err)
		}
		if ev.Event == client.EventStdout && !destroyed {
			destroyed = true
			if r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+id, g.operator, nil); r.Status != http.StatusNoContent {
				t.Fatalf("destroy mid-stream: %d %s", r.Status, r.Body)
			}
		}
		last = ev
	}
	if !destroyed || last.Error == nil || last.Error.Code != "sandbox_lost" {
		t.Fatalf("the stream of a destroyed sandbox ended with %s %s", last.Event, last.Data)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Fatalf("the stream took %s to end", took)
	}
	t.Logf("destroyed mid-stream: %s %s", last.Event, last.Data)
}
