package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway/client"
	"sandgate/internal/pgtest"
	"sandgate/nomad/localnomad"
)

// deployJob is the deployment's Nomad job, as an operator runs it.
const deployJob = "deploy/nomad/sandgate.nomad.hcl"

// deployVariable is the Nomad Variable the job reads its configuration
// and secrets from.
const deployVariable = "nomad/jobs/sandgate"

// TestTheDeploymentRunsAsANomadJobOnTheRealAgent: `make image` builds the
// gateway's image, deploy/nomad/sandgate.nomad.hcl runs it as a service
// job of two replicas on two gateway nodes of their own (never the
// sandbox worker), their configuration, DSN and key set from a Nomad
// Variable, their store PostgreSQL on the host; both get healthy through
// their /readyz check, one holds the background lease, and the agent flow
// passes through both: a token minted through one works on the other, a
// sandbox made through one is driven and destroyed through the other on
// the real worker.
func TestTheDeploymentRunsAsANomadJobOnTheRealAgent(t *testing.T) {
	need(t)
	dsn := pgtest.Database(t)
	t.Parallel()
	image := deployImage(t)

	// Two gateway nodes on loopback, each with ports of its own: the
	// replicas listen in the host's network.
	for i, name := range []string{"gateway-1", "gateway-2"} {
		a, err := suite.cluster.StartClientWith(context.Background(), name, localnomadClient(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Stop)
	}

	ns := deployNamespace(t)
	keys := filepath.Join(t.TempDir(), "keys")
	run(t, suite.gateway, "key", "generate", "--dir", keys, "--activate")
	operator := strings.TrimSpace(run(t, suite.gateway, "token", "mint", "--offline", "--role", "operator", "--subject", "e2e-deploy",
		"--ttl", "2h", "--key-dir", keys, "--store", "postgres:"+dsn, "--policy-dir", suite.policyDir))
	putDeployVariable(t, ns, dsn, keys)

	cmd := exec.Command(suite.nomadBin, "job", "run", "-detach", "-var", "image="+image, "-var", "replicas=2", //nolint:gosec // G204: the suite's own Nomad and job
		filepath.Join(suite.root, deployJob))
	cmd.Env = append(os.Environ(), "NOMAD_ADDR="+suite.server.HTTPAddr)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nomad job run %s: %v\n%s", deployJob, err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' allocations:\n%s", deployAllocs())
		}
		_, _, _ = suite.api.Jobs().Deregister("sandgate", true, nil)
	})
	submitted := time.Now()
	waitDeployed(t, 4*time.Minute)
	t.Logf("both replicas healthy %s after nomad job run", time.Since(submitted).Round(100*time.Millisecond))

	regs, _, err := suite.api.Services().Get("sandgate", nil)
	if err != nil || len(regs) != 2 {
		t.Fatalf("the sandgate service has %d registrations (%v), want 2", len(regs), err)
	}
	var replicas []*client.Client
	nodes := map[string]bool{}
	for _, r := range regs {
		if r.Address != "127.0.0.1" {
			t.Fatalf("a replica registered at %s, not on loopback", r.Address)
		}
		nodes[r.NodeID] = true
		c, err := client.New(client.Config{Addr: fmt.Sprintf("http://%s:%d", r.Address, r.Port), Token: operator})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, c)
	}
	if len(nodes) != 2 {
		t.Fatalf("the two replicas run on %d node(s), want two (distinct_hosts)", len(nodes))
	}
	holders := 0
	for _, c := range replicas {
		if leaseHeld(t, c.Addr()) {
			holders++
		}
	}
	if holders != 1 {
		t.Fatalf("%d replicas hold the background lease, want 1", holders)
	}

	ctx := context.Background()
	a, b := replicas[0], replicas[1]
	tk, err := a.MintToken(ctx, client.MintRequest{Role: new(client.RoleAgent), Subject: new("e2e-deploy-agent"), TTLSeconds: new(int64(3600))})
	if err != nil {
		t.Fatal(err)
	}
	agentB := withToken(t, b, tk.Token)
	sb, err := agentB.CreateSandbox(ctx, client.CreateRequest{Image: new(imageBusybox), MemoryMB: new(int64(128)), TTLSeconds: new(int64(600))})
	if err != nil || sb.State != client.StateRunning {
		t.Fatalf("create through the second replica with a token minted through the first: %+v %v", sb, err)
	}
	sessA := withToken(t, a, sb.Token)
	res, err := sessA.Exec(ctx, sb.ID, client.ExecRequest{Argv: []string{"echo", "hi"}})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "hi\n" {
		t.Fatalf("exec through the first replica: %+v %v", res, err)
	}
	if _, err := withToken(t, b, sb.Token).GetSandbox(ctx, sb.ID); err != nil {
		t.Fatalf("status through the second replica: %v", err)
	}
	if err := sessA.DestroySandbox(ctx, sb.ID); err != nil {
		t.Fatalf("destroy through the first replica: %v", err)
	}
	var p *client.Problem
	if _, err := withToken(t, b, sb.Token).GetSandbox(ctx, sb.ID); !errors.As(err, &p) || p.Status != http.StatusUnauthorized {
		t.Fatalf("the destroyed sandbox's token on the other replica: %v, want 401", err)
	}
	sbNS, err := api.NewClient(&api.Config{Address: suite.server.HTTPAddr, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if jobs, _, err := sbNS.Jobs().List(nil); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs left in the sandbox namespace: %d (%v)", len(jobs), err)
	}
	ds, err := b.Decisions(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, d := range ds {
		named[d.Replica] = true
	}
	if !named["sandgate.gateway[0]"] || !named["sandgate.gateway[1]"] {
		t.Fatalf("the decisions through one replica name %v, want both replicas", named)
	}
}

// localnomadClient is the i-th gateway node: on loopback, meta
// sandgate_role = "gateway", dynamic ports of its own.
func localnomadClient(i int) localnomad.ClientOptions {
	return localnomad.ClientOptions{Interface: "lo", Meta: []string{`sandgate_role = "gateway"`}, MinPort: 21000 + 1000*i, MaxPort: 21999 + 1000*i}
}

// deployImage builds the gateway's image with `make image` (in a build
// dir of the test's own, beside any other make of the tree), then the
// image the replicas run: that image with the suite's policy directory in
// /etc/sandgate/policies, as an operator ships a bundle of their own.
func deployImage(t *testing.T) string {
	t.Helper()
	tag := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	base, deploy := "sandgate-e2e/sandgate:"+tag, "sandgate-e2e/sandgate-deploy:"+tag
	t.Cleanup(func() {
		// The job is purged by then; its containers take a moment to go,
		// and an image in use would only lose its tag.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			out, err := exec.Command("docker", "ps", "-aq", "--filter", "ancestor="+deploy).Output() //nolint:gosec // G204: the test's own tag
			if err != nil || len(bytes.TrimSpace(out)) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond) // a poll interval
		}
		_ = exec.Command("docker", "rmi", "--force", deploy, base, "sandgate-e2e/sandgate:dev").Run() //nolint:gosec // G204: the test's own tags
	})
	mk := exec.Command("make", "image", "IMAGE=sandgate-e2e/sandgate", "VERSION="+tag, "BUILD="+t.TempDir()) //nolint:gosec // G204: the repository's own make target
	mk.Dir = suite.root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	ctxDir := t.TempDir()
	if err := copyTree(suite.policyDir, filepath.Join(ctxDir, "policies")); err != nil {
		t.Fatal(err)
	}
	df := "FROM " + base + "\nCOPY --chown=65532:65532 policies/ /etc/sandgate/policies/\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", deploy, ctxDir).CombinedOutput(); err != nil { //nolint:gosec // G204: the test's own build
		t.Fatalf("docker build %s: %v\n%s", deploy, err, out)
	}
	return deploy
}

// copyTree copies the regular files below src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755) //nolint:gosec // G301: an image's build context, read by the engine
		}
		b, err := os.ReadFile(path) //nolint:gosec // G304: the suite's own policy copy
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644) //nolint:gosec // G306: an image's build context
	})
}

// deployNamespace is the Nomad namespace of the deployment's sandboxes.
func deployNamespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("e2e-%d-deploy", suite.seq.Add(1))
	if _, err := suite.api.Namespaces().Register(&api.Namespace{Name: ns, Description: "sandgate e2e deployment"}, nil); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return ns
}

// putDeployVariable writes the variable the job reads: the replicas'
// configuration, the DSN, the (empty: no ACLs here) Nomad token and the
// key set of keys.
func putDeployVariable(t *testing.T, ns, dsn, keys string) {
	t.Helper()
	cfg := map[string]any{
		"data_dir":           "/alloc/data",
		"store":              map[string]any{"driver": "postgres", "dsn_file": "/secrets/store.dsn"},
		"signing_key_dir":    "/secrets/keys",
		"policy":             map[string]any{"dir": "/etc/sandgate/policies"},
		"nomad":              map[string]any{"address": suite.server.HTTPAddr, "token_file": "/secrets/nomad.token", "namespace": ns, "timeout": "10s"},
		"reaper_interval":    "1s",
		"reconcile_interval": "3s",
		"reclaim_interval":   "2s",
		"nodes":              []gwNode{sharedBudget()},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	var set bytes.Buffer
	entries, err := os.ReadDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pem") {
			pemb, err := os.ReadFile(filepath.Join(keys, e.Name())) //nolint:gosec // G304: the test's own key dir
			if err != nil {
				t.Fatal(err)
			}
			set.Write(pemb)
		}
	}
	active, err := os.ReadFile(filepath.Join(keys, "active")) //nolint:gosec // G304: the test's own key dir
	if err != nil {
		t.Fatal(err)
	}
	v := &api.Variable{Path: deployVariable, Items: api.VariableItems{
		"config": string(b), "store_dsn": dsn, "nomad_token": "",
		"signing_keys": set.String(), "signing_key_active": strings.TrimSpace(string(active)),
	}}
	if _, _, err := suite.api.Variables().Create(v, nil); err != nil {
		t.Fatalf("put the variable %s: %v", deployVariable, err)
	}
	t.Cleanup(func() { _, _ = suite.api.Variables().Delete(deployVariable, nil) })
}

// waitDeployed waits until the job's latest deployment succeeded: every
// replica placed and healthy through its check.
func waitDeployed(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		d, _, err := suite.api.Jobs().LatestDeployment("sandgate", nil)
		switch {
		case err != nil:
			last = err.Error()
		case d == nil:
			last = "no deployment yet"
		case d.Status == api.DeploymentStatusSuccessful:
			return
		case d.Status == api.DeploymentStatusFailed || d.Status == api.DeploymentStatusCancelled:
			t.Fatalf("the deployment %s: %s", d.Status, d.StatusDescription)
		default:
			last = d.Status + ": " + d.StatusDescription
		}
		time.Sleep(500 * time.Millisecond) // a poll interval
	}
	t.Fatalf("the deployment did not succeed within %s: %s", within, last)
}

// deployAllocs describes the job's allocations: their state, their
// task's events and the end of its log.
func deployAllocs() string {
	allocs, _, err := suite.api.Jobs().Allocations("sandgate", true, nil)
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	for _, stub := range allocs {
		fmt.Fprintf(&out, "%s %s on %s: %s\n", stub.ID[:8], stub.Name, stub.NodeName, stub.ClientStatus)
		for task, st := range stub.TaskStates {
			for _, e := range st.Events {
				fmt.Fprintf(&out, "  %s %s: %s %s\n", task, e.Type, e.DisplayMessage, e.Details["driver_error"])
			}
		}
		logs := exec.Command(suite.nomadBin, "alloc", "logs", "-stderr", "-tail", "-n", "30", stub.ID, "sandgate") //nolint:gosec // G204: the suite's own Nomad
		logs.Env = append(os.Environ(), "NOMAD_ADDR="+suite.server.HTTPAddr)
		b, _ := logs.CombinedOutput()
		fmt.Fprintf(&out, "  stderr:\n%s\n", b)
	}
	return out.String()
}

// leaseHeld reads a replica's /readyz: does it hold the background lease?
func leaseHeld(t *testing.T, addr string) bool {
	t.Helper()
	resp, err := http.Get(addr + "/readyz") //nolint:gosec,noctx // G107: the test's own replica
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Ready      bool `json:"ready"`
		Background struct {
			Held   bool `json:"held"`
			Shared bool `json:"shared"`
		} `json:"background"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || !body.Ready || !body.Background.Shared {
		t.Fatalf("/readyz of %s: %+v %v", addr, body, err)
	}
	return body.Background.Held
}

// withToken is c with another token.
func withToken(t *testing.T, c *client.Client, tok string) *client.Client {
	t.Helper()
	n, err := client.New(client.Config{Addr: c.Addr(), Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// run runs the suite's binary and returns its standard output.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...) //nolint:gosec // G204: the binary the suite built
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
