package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
	"sandgate/store/postgres"
	"sandgate/test/testbin"
)

// binary is the sandgate binary, built once for the package.
var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

func binary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sandgate-replicas-")
		if err != nil {
			binaryErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "sandgate"), "sandgate/cmd/sandgate") //nolint:gosec // G204: the test builds the product
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		binaryPath = filepath.Join(dir, "sandgate")
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// deployment is several `sandgate serve` replicas on one PostgreSQL
// database and one simulated Nomad cluster, sharing one signing key, as
// an operator runs them behind a load balancer.
type deployment struct {
	t        testing.TB
	opts     deploymentOptions
	bin      string
	dsn      string
	sim      *nomadsim.Server
	simURL   string
	keyFile  string
	operator string
	replicas []*replica
}

// deploymentOptions shape a deployment; zero values take the defaults.
type deploymentOptions struct {
	// DSN is the shared database; "" runs the one replica on a bbolt
	// file of its own.
	DSN string
	// Replicas is how many `serve` processes start.
	Replicas int
	// Budget is each node's limit of live sandboxes (default budget).
	Budget int64
	// PolicyDir is served instead of the embedded bundle.
	PolicyDir string
	// MaxConns is store.max_conns (default: the store's).
	MaxConns int32
	// RunDelay is how long the simulated cluster keeps an allocation
	// pending before it runs (default 10 ms).
	RunDelay time.Duration
}

// replica is one `sandgate serve` of a deployment.
type replica struct {
	name   string
	dir    string
	config string
	url    string
	proc   testbin.Serve
}

// budget is each enrolled node's limit of live sandboxes.
const budget = 4

// nodes are the simulator's sandbox workers, enrolled by every replica.
var nodes = []string{"worker-1", "worker-2"}

// newDeployment writes the configuration of n replicas on dsn and a new
// simulated cluster, mints an operator token into the database, and
// starts them.
func newDeployment(t testing.TB, dsn string, n int) *deployment {
	t.Helper()
	return deploy(t, deploymentOptions{DSN: dsn, Replicas: n})
}

// deploy is newDeployment shaped by o.
func deploy(t testing.TB, o deploymentOptions) *deployment {
	t.Helper()
	if o.Budget == 0 {
		o.Budget = budget
	}
	simCfg := nomadsim.DefaultConfig()
	simCfg.RunDelay = 10 * time.Millisecond
	if o.RunDelay > 0 {
		simCfg.RunDelay = o.RunDelay
	}
	sim, simURL := nomadsim.NewTestServer(t, simCfg)
	if o.DSN == "" && o.Replicas != 1 {
		t.Fatalf("a deployment on bbolt has one replica, not %d", o.Replicas)
	}
	d := &deployment{t: t, opts: o, bin: binary(t), dsn: o.DSN, sim: sim, simURL: simURL}
	keys := t.TempDir()
	d.keyFile = filepath.Join(keys, "signing.key")
	for i := range o.Replicas {
		d.add(fmt.Sprintf("replica-%d", i+1))
	}
	// The first operator token, minted offline into the store; the key
	// file it creates is the one every replica signs with.
	into := []string{"--store", "postgres:" + o.DSN}
	if o.DSN == "" {
		into = []string{"--store", "bolt:" + d.replicas[0].dir}
	}
	out, err := d.run(append([]string{"token", "mint", "--offline", "--role", "operator", "--subject", "ops", "--ttl", "2h",
		"--data", keys, "--key-file", d.keyFile}, into...)...)
	if err != nil {
		t.Fatalf("token mint: %v", err)
	}
	d.operator = strings.TrimSpace(out)
	for _, r := range d.replicas {
		d.start(r)
	}
	t.Cleanup(func() {
		for _, r := range d.replicas {
			r.proc.Signal(os.Interrupt, 20*time.Second)
			if t.Failed() {
				t.Logf("%s log:\n%s", r.name, r.proc.Log())
			}
		}
	})
	return d
}

func (d *deployment) run(args ...string) (string, error) {
	cmd := exec.Command(d.bin, args...) //nolint:gosec // G204: the binary the test built
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// add writes a replica's configuration.
func (d *deployment) add(name string) *replica {
	d.t.Helper()
	r := &replica{name: name, dir: d.t.TempDir()}
	var enroll []map[string]any
	for _, n := range nodes {
		enroll = append(enroll, map[string]any{"name": n, "max_sandboxes": d.opts.Budget})
	}
	cfg := map[string]any{
		"listen":           "127.0.0.1:0",
		"data_dir":         r.dir,
		"replica":          name,
		"signing_key_file": d.keyFile,
		"nomad":            map[string]any{"address": d.simURL, "timeout": "5s"},
		"reaper_interval":  "1s", "reclaim_interval": "1s", "reconcile_interval": "2s",
		// A starting record is another replica's create in flight until
		// then; past it, reconcile settles or ends it.
		"start_timeout": "5s",
		"nodes":         enroll,
	}
	if d.dsn != "" {
		st := map[string]any{"driver": "postgres", "dsn": d.dsn, "statement_timeout": "2s", "connect_timeout": "10s"}
		if d.opts.MaxConns > 0 {
			st["max_conns"] = d.opts.MaxConns
		}
		cfg["store"] = st
	}
	if d.opts.PolicyDir != "" {
		cfg["policy"] = map[string]any{"dir": d.opts.PolicyDir}
	}
	b, _ := json.Marshal(cfg)
	r.config = filepath.Join(r.dir, "serve.json")
	if err := os.WriteFile(r.config, b, 0o600); err != nil {
		d.t.Fatal(err)
	}
	d.replicas = append(d.replicas, r)
	return r
}

// start runs a replica and waits until it listens.
func (d *deployment) start(r *replica) {
	d.t.Helper()
	cmd := exec.Command(d.bin, "serve", "--config", r.config) //nolint:gosec // G204: the binary the test built
	r.url = "http://" + r.proc.Start(d.t, cmd, 90*time.Second, nil)
}

func (r *replica) client(t testing.TB, tok string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addr: r.url, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// background is what a replica's /readyz says of the background lease.
type background struct {
	Replica string `json:"replica"`
	Holder  string `json:"holder"`
	Held    bool   `json:"held"`
	Epoch   int64  `json:"epoch"`
	Shared  bool   `json:"shared"`
}

// lease reads a replica's /readyz; ok is false when it does not answer.
func (r *replica) lease() (background, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return background{}, false
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Background background `json:"background"`
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &body) != nil {
		return background{}, false
	}
	return body.Background, true
}

// holder waits until exactly one of the replicas (all answering) holds
// the background lease, and returns it.
func (d *deployment) holder(among []*replica, within time.Duration) *replica {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var held []*replica
		for _, r := range among {
			if b, ok := r.lease(); ok && b.Held {
				held = append(held, r)
			}
		}
		if len(held) == 1 {
			return held[0]
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("no single holder of the background lease within %s (%d hold it)", within, len(held))
		}
		time.Sleep(50 * time.Millisecond) // a poll interval
	}
}

// metric sums a counter's samples that carry label, as a replica's
// /metrics shows them.
func (r *replica) metric(t *testing.T, name, label string) float64 {
	t.Helper()
	resp, err := http.Get(r.url + "/metrics") //nolint:noctx // a test's short read of its own process
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name) || !strings.Contains(line, label) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
			sum += v
		}
	}
	return sum
}

// openStore is the test's own handle on the deployment's database.
func openStore(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// overrun reports a node or a principal holding more live sandboxes than
// its limit, reading the database directly.
func overrun(ctx context.Context, s store.Store, quota int) (string, error) {
	live, err := s.List(ctx, store.Filter{LiveOnly: true})
	if err != nil {
		return "", err
	}
	byNode, byPrincipal := map[string]int{}, map[string]int{}
	for _, r := range live {
		byNode[r.Node]++
		byPrincipal[r.Principal]++
	}
	for n, c := range byNode {
		if c > budget {
			return fmt.Sprintf("node %s holds %d live sandboxes, its budget is %d", n, c, budget), nil
		}
	}
	for p, c := range byPrincipal {
		if c > quota {
			return fmt.Sprintf("principal %s holds %d live sandboxes, its quota is %d", p, c, quota), nil
		}
	}
	return "", nil
}
