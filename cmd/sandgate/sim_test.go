package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/client"
)

// watchedOutput is a command's standard output or error: kept whole, and
// waited on for a line that matches.
type watchedOutput struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{} // closed and replaced at every write
}

func newWatchedOutput() *watchedOutput { return &watchedOutput{changed: make(chan struct{})} }

func (w *watchedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *watchedOutput) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// await returns the submatches of re in the complete lines written so far,
// waiting for them until done is closed or within has passed (then it
// fails t, showing what was written).
func (w *watchedOutput) await(t *testing.T, re *regexp.Regexp, done <-chan struct{}, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		w.mu.Lock()
		all, changed := w.buf.String(), w.changed
		w.mu.Unlock()
		if m := re.FindStringSubmatch(all[:strings.LastIndexByte(all, '\n')+1]); m != nil {
			return m
		}
		select {
		case <-changed:
		case <-done:
			t.Fatalf("the command ended before printing %s:\n%s", re, w.String())
		case <-deadline:
			t.Fatalf("nothing matched %s within %s:\n%s", re, within, w.String())
		}
	}
}

// backgroundCLI is a command of the CLI (sim, serve) running in-process
// until the test ends: its context is canceled, as SIGINT would end it,
// and it must then exit 0.
type backgroundCLI struct {
	stdout, stderr *watchedOutput
	done           chan struct{}
	code           int
}

func startCLI(t *testing.T, args ...string) *backgroundCLI {
	t.Helper()
	b := &backgroundCLI{stdout: newWatchedOutput(), stderr: newWatchedOutput(), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(b.done)
		b.code = runContext(ctx, args, strings.NewReader(""), b.stdout, b.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.done:
		case <-time.After(60 * time.Second):
			t.Errorf("%v did not stop within 60 s of its cancel", args)
			return
		}
		if b.code != exitOK {
			t.Errorf("%v exited %d\nstdout: %s\nstderr: %s", args, b.code, b.stdout, b.stderr)
		}
	})
	return b
}

// simAddress is the line `sandgate sim` prints for the gateways.
var simAddress = regexp.MustCompile(`(?m)^  export NOMAD_ADDR=(http://127\.0\.0\.1:[0-9]+)$`)

// serveListening is the line `sandgate serve` logs once it accepts
// connections, with its address.
var serveListening = regexp.MustCompile(`msg="sandgate gateway listening" addr=([0-9.:]+)`)

// replica is a `sandgate serve` with its own data dir and store.
type replica struct {
	url      string
	operator string // an operator token it accepts
}

// startReplicas runs n `sandgate serve` replicas against the Nomad at
// nomadAddr, each on a new data dir with an operator token minted into
// it (offline, as before a first start), each enrolling the simulator's
// two workers. They start side by side; it returns once all listen. Their
// reconcile interval is an hour: the test knows when they reconcile.
func startReplicas(t *testing.T, nomadAddr string, n int) []replica {
	t.Helper()
	rs, procs := make([]replica, n), make([]*backgroundCLI, n)
	for i := range rs {
		data := t.TempDir()
		code, out, stderr := runCLI(t, "", "token", "mint", "--offline", "--role", "operator", "--subject", fmt.Sprintf("replica-%d", i+1), "--ttl", "1h", "--data", data)
		rs[i].operator = strings.TrimSpace(mustOK(t, code, out, stderr))
		cfg := writeConfig(t, fmt.Sprintf(`{"listen": "127.0.0.1:0", "data_dir": %q, "nomad": {"address": %q},
		  "reconcile_interval": "1h",
		  "nodes": [{"name": "worker-1"}, {"name": "worker-2", "egress": true}]}`, data, nomadAddr))
		procs[i] = startCLI(t, "serve", "--config", cfg)
	}
	for i, p := range procs {
		rs[i].url = "http://" + p.stderr.await(t, serveListening, p.done, 90*time.Second)[1]
	}
	return rs
}

func (r replica) client(t *testing.T, tok string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addr: r.url, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hosts is the replica's GET /v1/hosts by node name.
func (r replica) hosts(t *testing.T) map[string]client.Host {
	t.Helper()
	list, err := r.client(t, r.operator).ListHosts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]client.Host{}
	for _, h := range list {
		m[h.Name] = h
	}
	return m
}

// nomadCalls is how many calls of op the replica made to Nomad
// (sandgate_nomad_request_duration_seconds_count on /metrics).
func (r replica) nomadCalls(t *testing.T, op string) int {
	t.Helper()
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prefix := `sandgate_nomad_request_duration_seconds_count{op="` + op + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s%s: %v", prefix, v, err)
			}
			return n
		}
	}
	return 0
}

// eventually waits until cond holds, checking it every 50 ms, and fails t
// with what cond last said when within has passed.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, why)
		}
		<-tick.C
	}
}

// Two `sandgate serve` replicas, each with its own data dir, share the one
// simulated cluster `sandgate sim` serves, as they would share a real
// Nomad: both see the same nodes (by Nomad's node ids), a sandbox created
// through the first is a job of the simulator, and the second sees its
// allocation on the node through Nomad while its own store knows of no
// sandbox.
func TestServeReplicasShareTheClusterOfSandgateSim(t *testing.T) {
	t.Parallel()
	sim := startCLI(t, "sim", "--listen", "127.0.0.1:0")
	nomadAddr := sim.stdout.await(t, simAddress, sim.done, 30*time.Second)[1]
	if out := sim.stdout.String(); !strings.Contains(out, "SIMULATED NOMAD CLUSTER") || !strings.Contains(out, `"address": "`+nomadAddr+`"`) {
		t.Fatalf("sim does not say that the cluster is simulated, or not how serve is pointed at it:\n%s", out)
	}
	rs := startReplicas(t, nomadAddr, 2)
	r1, r2 := rs[0], rs[1]
	// Each replica reconciles once at start and purges the sandbox jobs
	// it has no record of (L4); the create waits until both have listed
	// the jobs (the reconcile interval is an hour).
	eventually(t, 30*time.Second, func() (bool, string) {
		n1, n2 := r1.nomadCalls(t, "list_jobs"), r2.nomadCalls(t, "list_jobs")
		return n1 > 0 && n2 > 0, fmt.Sprintf("the replicas listed the jobs %d and %d times", n1, n2)
	})

	h1, h2 := r1.hosts(t), r2.hosts(t)
	for _, name := range []string{"worker-1", "worker-2", "control-1"} {
		a, b := h1[name], h2[name]
		if a.ID == "" || a.ID != b.ID || a.Nomad.Status != "ready" || b.Nomad.Status != "ready" {
			t.Fatalf("node %s: replica 1 sees %+v, replica 2 %+v; want the same ready Nomad node", name, a, b)
		}
	}

	sbx, err := r1.client(t, r1.operator).CreateSandbox(t.Context(), client.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if sbx.State != "running" || sbx.Node == "" {
		t.Fatalf("created %+v, want a running sandbox on a node", sbx)
	}

	resp, err := http.Get(nomadAddr + "/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []struct{ ID, Status string }
	err = json.NewDecoder(resp.Body).Decode(&jobs)
	_ = resp.Body.Close()
	if err != nil || len(jobs) != 1 || !strings.HasSuffix(jobs[0].ID, sbx.ID) {
		t.Fatalf("the simulator's /v1/jobs: %+v (%v), want the job of sandbox %s", jobs, err, sbx.ID)
	}

	eventually(t, 30*time.Second, func() (bool, string) {
		a, b := r1.hosts(t)[sbx.Node], r2.hosts(t)[sbx.Node]
		if a.Budget.Capacity == nil || b.Budget.Capacity == nil {
			return false, fmt.Sprintf("no capacity read: %+v / %+v", a.Budget, b.Budget)
		}
		held := client.Resources{CPUMHz: sbx.CPUMHz, MemoryMB: sbx.MemoryMB}
		return b.Budget.Capacity.Sandboxes == held && a.Budget.Capacity.Sandboxes == held &&
				a.LiveSandboxes == 1 && b.LiveSandboxes == 0,
			fmt.Sprintf("on %s, Nomad's sandbox allocations as replica 1 sees them: %+v (its live sandboxes %d); replica 2: %+v (%d); want %+v and 1, 0",
				sbx.Node, a.Budget.Capacity.Sandboxes, a.LiveSandboxes, b.Budget.Capacity.Sandboxes, b.LiveSandboxes, held)
	})
}

// `sandgate sim` refuses, before it serves, an address its nodes could
// not advertise: a listen address without a host and no --advertise, or
// an --advertise that is not HOST:PORT.
func TestSimRefusesAnAddressItsNodesCannotAdvertise(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a listen address without a host", []string{"sim", "--listen", ":0"}, "--advertise HOST:PORT"},
		{"every address, unnamed", []string{"sim", "--listen", "0.0.0.0:0"}, "--advertise HOST:PORT"},
		{"an advertise address without a port", []string{"sim", "--listen", "127.0.0.1:0", "--advertise", "sim.example"}, "want HOST:PORT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runCLI(t, "", c.args...)
			if code != exitError || !strings.Contains(stderr, c.want) || strings.Contains(out, "NOMAD_ADDR=") {
				t.Fatalf("exit %d, want 1 naming %q\nstdout: %s\nstderr: %s", code, c.want, out, stderr)
			}
		})
	}
}
