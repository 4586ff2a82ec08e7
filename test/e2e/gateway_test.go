package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
	"sandgate/test/testbin"
)

// gwNode is a node a test's gateway enrolls at start.
type gwNode struct {
	Name         string `json:"name"`
	Egress       bool   `json:"egress,omitempty"`
	MaxSandboxes int64  `json:"max_sandboxes,omitempty"`
	CPUMHz       int64  `json:"cpu_mhz,omitempty"`
	MemoryMB     int64  `json:"memory_mb,omitempty"`
}

// gwOptions shapes a test's gateway; zero values take the suite's defaults.
type gwOptions struct {
	Nodes             []gwNode // default: the shared node
	ReaperInterval    string   // default "1s"
	ReconcileInterval string   // default "3s"
	ReclaimInterval   string   // default "2s"
	// Agents are the subjects of agent tokens minted before the start.
	Agents []string
	// Binary runs instead of the suite's sandgate (crash_test.go: the
	// build with the test hooks); Env is added to its environment.
	Binary string
	Env    []string
	// NomadAddress is where the gateway reaches Nomad (faults_test.go: a
	// proxy that injects faults); default the suite's server.
	NomadAddress string
	// NomadTimeout is the per-call timeout (default "10s"); StartTimeout
	// how long a sandbox may stay starting (default the gateway's).
	NomadTimeout string
	StartTimeout string
}

// gw is one `sandgate serve` process of a test, in its own data dir and
// Nomad namespace.
type gw struct {
	t         testing.TB
	dir       string
	config    string
	namespace string
	url       string
	operator  string
	agents    map[string]string // subject -> agent token
	nomad     *api.Client       // scoped to the namespace
	bin       string            // the binary start runs
	env       []string          // added to its environment

	proc testbin.Serve // every start's standard error is its log
}

// startGateway mints an operator token offline, writes the config and
// starts the gateway; the test's cleanup stops it and purges its jobs.
func startGateway(t testing.TB, o gwOptions) *gw {
	t.Helper()
	need(t)
	n := suite.seq.Add(1)
	ns := fmt.Sprintf("e2e-%d-%s", n, strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")))
	if len(ns) > 60 {
		ns = ns[:60]
	}
	ns = strings.TrimRight(ns, "-")
	if _, err := suite.api.Namespaces().Register(&api.Namespace{Name: ns, Description: "sandgate e2e " + t.Name()}, nil); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	nc, err := api.NewClient(&api.Config{Address: suite.server.HTTPAddr, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	g := &gw{t: t, dir: filepath.Join(suite.dir, "gw-"+ns), namespace: ns, nomad: nc, bin: o.Binary, env: o.Env}
	if g.bin == "" {
		g.bin = suite.gateway
	}
	if err := os.MkdirAll(g.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if len(o.Nodes) == 0 {
		o.Nodes = []gwNode{sharedBudget()}
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	cfg := map[string]any{
		"listen":             "127.0.0.1:0",
		"data_dir":           g.dir,
		"policy_dir":         suite.policyDir,
		"nomad":              map[string]any{"address": or(o.NomadAddress, suite.server.HTTPAddr), "namespace": ns, "timeout": or(o.NomadTimeout, "10s")},
		"reaper_interval":    or(o.ReaperInterval, "1s"),
		"reconcile_interval": or(o.ReconcileInterval, "3s"),
		"reclaim_interval":   or(o.ReclaimInterval, "2s"),
		"nodes":              o.Nodes,
	}
	if o.StartTimeout != "" {
		cfg["start_timeout"] = o.StartTimeout
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	g.config = filepath.Join(g.dir, "serve.json")
	if err := os.WriteFile(g.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g.operator = g.mint(t, "operator", "e2e-operator")
	g.agents = map[string]string{}
	for _, sub := range o.Agents {
		g.agents[sub] = g.mint(t, "agent", sub)
	}
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("gateway log (%s):\n%s", g.dir, g.logText())
		}
		g.purgeJobs()
	})
	g.start(t)
	return g
}

// sharedBudget is the shared node's enrollment in a test's gateway,
// derived from what Nomad can allocate there (the gateway refuses a budget
// above it, B1): half of its CPU and at most half of its memory, so that
// the gateways of two tests running at once (the default -parallel on two
// cores) fit on it together. The real client fingerprints about 5,200 MHz.
func sharedBudget() gwNode {
	room := allocatable(suite.worker)
	return gwNode{Name: sharedNode, MaxSandboxes: 20, CPUMHz: room.cpuMHz / 2, MemoryMB: min(8192, room.memoryMB/2)}
}

// ownNode starts a client agent of the test's own (for a test that stops,
// drains or misconfigures its node; meta lines go into its client block)
// and a gateway that enrolls only that node, with a small budget.
func ownNode(t *testing.T, n gwNode, meta ...string) (*agent, *gw) {
	t.Helper()
	return ownNodeWith(t, n, gwOptions{}, meta...)
}

// ownNodeWith is ownNode with the gateway shaped by o (its Nodes are set
// to the one node).
func ownNodeWith(t *testing.T, n gwNode, o gwOptions, meta ...string) (*agent, *gw) {
	t.Helper()
	need(t)
	a, err := startClient(n.Name, meta...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	n.MaxSandboxes, n.CPUMHz, n.MemoryMB = 4, min(1000, allocatable(a).cpuMHz), min(2048, allocatable(a).memoryMB)
	o.Nodes = []gwNode{n}
	return a, startGateway(t, o)
}

// mint mints a token offline with the gateway's key (the gateway must be
// stopped: the store is locked while it runs).
func (g *gw) mint(t testing.TB, role, subject string) string {
	t.Helper()
	cmd := exec.Command(suite.gateway, "token", "mint", "--offline", "--role", role, "--subject", subject, //nolint:gosec // G204: the binary the suite built
		"--ttl", "2h", "--data", g.dir, "--policy-dir", suite.policyDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token mint %s: %v\n%s", role, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func (g *gw) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(g.bin, "serve", "--config", g.config) //nolint:gosec // G204: the binary the suite built
	if len(g.env) > 0 {
		cmd.Env = append(os.Environ(), g.env...)
	}
	g.url = "http://" + g.proc.Start(t, cmd, 90*time.Second, nil)
}

// stop ends the gateway with SIGINT, as an operator would.
func (g *gw) stop() { g.proc.Signal(os.Interrupt, 30*time.Second) }

// kill9 ends the gateway with SIGKILL: no shutdown code runs.
func (g *gw) kill9() { g.proc.Signal(os.Kill, 30*time.Second) }

func (g *gw) logText() string { return g.proc.Log() }

// purgeJobs removes what the test left in its namespace, even after a
// failure.
func (g *gw) purgeJobs() {
	jobs, _, err := g.nomad.Jobs().List(nil)
	if err != nil {
		return
	}
	for _, j := range jobs {
		_, _, _ = g.nomad.Jobs().Deregister(j.ID, true, nil)
	}
}

// jobs lists the job ids in the test's namespace.
func (g *gw) jobs(t testing.TB) []string {
	t.Helper()
	list, _, err := g.nomad.Jobs().List(nil)
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	ids := make([]string, 0, len(list))
	for _, j := range list {
		if j.Status != "dead" || !j.Stop {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

var httpClient = &http.Client{Timeout: 5 * time.Minute}

// api is the gateway's API as t speaks it.
func (g *gw) api(t testing.TB) *apitest.API {
	return &apitest.API{T: t, URL: g.url, HTTP: httpClient}
}

// create creates a sandbox on the shared node (100 MHz, 128 MB unless
// body says otherwise), waiting while the node is full, and fails the
// test unless it runs.
func (g *gw) create(t testing.TB, tok string, body map[string]any) apitest.Created {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["node"]; !ok {
		body["node"] = sharedNode
	}
	if _, ok := body["cpu_mhz"]; !ok {
		body["cpu_mhz"] = 100
	}
	if _, ok := body["memory_mb"]; !ok {
		body["memory_mb"] = 128
	}
	r := g.createWhenRoom(t, tok, body)
	sb := apitest.ExpectCreated(t, r)
	if sb.State != "running" {
		t.Fatalf("the sandbox does not run on the real agent: state %v, last_error %v (%s)", sb.State, sb.Body["last_error"], r)
	}
	return sb
}

// createWhenRoom creates a sandbox from body, waiting while the node is
// full: the shared node is shared with the other tests' gateways, and a
// create that finds it full is refused 429 (budget_exhausted before
// Nomad, B1, or placement_failed when another gateway's sandbox took the
// room after admission). It retries until the node has room again, for
// at most 3 minutes; any other answer is returned as it is.
func (g *gw) createWhenRoom(t testing.TB, tok string, body map[string]any) apitest.Reply {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", tok, body)
		if r.Status != http.StatusTooManyRequests || time.Now().After(deadline) {
			return r
		}
		var p struct {
			Code    string   `json:"code"`
			RuleIDs []string `json:"rule_ids"`
		}
		full := json.Unmarshal(r.Body, &p) == nil &&
			(p.Code == "placement_failed" || p.Code == "budget_exhausted" && slices.Equal(p.RuleIDs, []string{"B1"}))
		if !full {
			return r
		}
		t.Logf("create %v: the node is full (%s); retrying when a sandbox ends", body, r)
		time.Sleep(500 * time.Millisecond) // poll for the room; bounded by deadline
	}
}

// execResult is the JSON answer of an exec, as the project's API client
// reads it.
type execResult struct{ client.ExecResult }

func (e execResult) code() int {
	if e.ExitCode == nil {
		return -1
	}
	return *e.ExitCode
}

// exec runs a command and fails the test unless the gateway answered 200.
func (g *gw) exec(t testing.TB, id, tok string, body map[string]any) execResult {
	t.Helper()
	var res execResult
	g.api(t).Exec(tok, id, body).Decode(t, &res)
	return res
}

// sh runs a shell script in the sandbox and returns its stdout, failing the
// test on a non-zero exit.
func (g *gw) sh(t testing.TB, id, tok, script string) string {
	t.Helper()
	res := g.exec(t, id, tok, map[string]any{"argv": []string{"sh", "-c", script}})
	if res.code() != 0 {
		t.Fatalf("sh -c %q: exit %d, stderr %q", script, res.code(), res.Stderr)
	}
	return res.Stdout
}

// status reads a sandbox with the operator token.
func (g *gw) status(t testing.TB, id string) map[string]any {
	t.Helper()
	r := g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+id, g.operator, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status %s: %s", id, r)
	}
	return r.JSON(t)
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
