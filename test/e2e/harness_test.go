package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The suite's local images (test/e2e/images/build.sh builds them once).
const (
	imageBusybox = "sandgate-e2e/busybox:1"
	imageDebian  = "sandgate-e2e/debian:12"
)

// requireEnv, set to "require", turns a skip for a missing prerequisite
// into a failure (.ci/run sets it).
const requireEnv = "SANDGATE_E2E"

// suite is what TestMain set up for every test.
var suite struct {
	skip      string // why the suite cannot run here; "" when it can
	root      string // the repository root
	nomadBin  string
	gateway   string // the sandgate binary
	policyDir string // the embedded bundle with the e2e data patch
	dir       string // everything the suite writes
	iface     string // the client agents' network_interface
	server    *agent
	serverRPC string // 127.0.0.1:PORT
	worker    *agent // the shared client node "worker-1"
	api       *api.Client

	mu      sync.Mutex
	clients []*agent // every client agent, the shared one included
	seq     atomic.Int64
}

// sharedNode is the client node every test may place sandboxes on.
const sharedNode = "worker-1"

func TestMain(m *testing.M) {
	code := func() int {
		if err := setUp(); err != nil {
			suite.skip = err.Error()
		}
		defer tearDown()
		if suite.skip != "" {
			fmt.Fprintf(os.Stderr, "e2e: %s\n", suite.skip)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// need returns the suite for a test, or skips it (fails it under
// SANDGATE_E2E=require) when the suite cannot run here.
func need(t testing.TB) {
	t.Helper()
	if suite.skip == "" {
		return
	}
	if os.Getenv(requireEnv) == "require" {
		t.Fatalf("the real-Nomad suite must run here (%s=require): %s", requireEnv, suite.skip)
	}
	t.Skip(suite.skip)
}

// skipError is a prerequisite the machine lacks: the suite skips.
type skipError struct{ msg string }

func (e skipError) Error() string { return e.msg }

func setUp() error {
	_, file, _, _ := runtime.Caller(0)
	suite.root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	suite.nomadBin = os.Getenv("NOMAD_BIN")
	if suite.nomadBin == "" {
		suite.nomadBin = filepath.Join(suite.root, "..", "shared", "nomad", "nomad")
	}
	if fi, err := os.Stat(suite.nomadBin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return skipError{fmt.Sprintf("skipped: no Nomad binary at %s (set NOMAD_BIN)", suite.nomadBin)}
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return skipError{fmt.Sprintf("skipped: no Docker engine reachable (docker info: %v: %s)", err, strings.TrimSpace(string(out)))}
	}
	if os.Geteuid() != 0 {
		return skipError{"skipped: a Nomad client with the docker driver needs root (alloc dir mounts)"}
	}
	iface, err := firstInterface()
	if err != nil {
		return skipError{"skipped: " + err.Error()}
	}
	suite.iface = iface
	if suite.dir, err = os.MkdirTemp("", "sandgate-e2e-"); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var imgErr, binErr, polErr error
	wg.Go(func() { imgErr = buildImages() })
	wg.Go(func() { binErr = buildGateway() })
	wg.Go(func() { polErr = writePolicyDir() })
	if err := startServer(); err != nil {
		wg.Wait()
		return fmt.Errorf("nomad server: %w", err)
	}
	w, err := startClient(sharedNode)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("nomad client: %w", err)
	}
	suite.worker = w
	return errors.Join(imgErr, binErr, polErr)
}

func buildImages() error {
	script := filepath.Join(suite.root, "test", "e2e", "images", "build.sh")
	cmd := exec.Command("bash", script, imageBusybox, imageDebian) //nolint:gosec // G204: the suite's own script
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building the sandbox images: %w\n%s", err, out)
	}
	return nil
}

func buildGateway() error {
	suite.gateway = filepath.Join(suite.dir, "sandgate")
	cmd := exec.Command("go", "build", "-o", suite.gateway, "./cmd/sandgate") //nolint:gosec // G204: the suite builds the product
	cmd.Dir = suite.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// writePolicyDir copies the bundle of policies/ (Rego, data.json, manifest;
// no Go) and applies the e2e data patch: the only difference from the
// embedded bundle is data.
func writePolicyDir() error {
	src := filepath.Join(suite.root, "policies")
	suite.policyDir = filepath.Join(suite.dir, "policies")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(suite.policyDir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		if strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // G304: the repository's own bundle
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600) //nolint:gosec // G703: a path below the suite's own temp dir
	})
	if err != nil {
		return err
	}
	patch, err := os.ReadFile(filepath.Join(suite.root, "test", "testdata", "e2e-policy-data-patch.json"))
	if err != nil {
		return err
	}
	dataFile := filepath.Join(suite.policyDir, "data.json")
	data, err := os.ReadFile(dataFile) //nolint:gosec // G304: the copy just written
	if err != nil {
		return err
	}
	merged, err := mergePatch(data, patch)
	if err != nil {
		return err
	}
	return os.WriteFile(dataFile, merged, 0o600) //nolint:gosec // G703: the suite's own copy of the bundle
}

// mergePatch applies an RFC 7386 JSON merge patch.
func mergePatch(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	var merge func(a, b any) any
	merge = func(a, b any) any {
		bm, ok := b.(map[string]any)
		if !ok {
			return b
		}
		am, ok := a.(map[string]any)
		if !ok {
			am = map[string]any{}
		}
		for k, v := range bm {
			if v == nil {
				delete(am, k)
				continue
			}
			am[k] = merge(am[k], v)
		}
		return am
	}
	return json.MarshalIndent(merge(d, p), "", " ")
}

func startServer() error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	dir := filepath.Join(suite.dir, "ctl-1")
	hcl := fmt.Sprintf(serverHCL, "ctl-1", filepath.Join(dir, "data"), ports[0], ports[1], ports[2])
	a, err := startAgent(suite.nomadBin, "ctl-1", dir, hcl, ports[0])
	if err != nil {
		return err
	}
	suite.server, suite.serverRPC = a, fmt.Sprintf("127.0.0.1:%d", ports[1])
	suite.api, err = nomadAPI(a.httpAddr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if leader, err := suite.api.Status().Leader(); err == nil && leader != "" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the server elected no leader within 60 s")
}

// startClient starts a client-only agent named name, with the given node
// meta, and waits until its node is ready with a healthy docker driver.
func startClient(name string, meta ...string) (*agent, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(suite.dir, name)
	hcl := fmt.Sprintf(clientHCL, name, filepath.Join(dir, "data"), ports[0], ports[1], ports[2], suite.serverRPC, suite.iface)
	if len(meta) > 0 {
		hcl = strings.Replace(hcl, "client {\n", "client {\n  meta {\n"+strings.Join(meta, "\n")+"\n  }\n", 1)
	}
	a, err := startAgent(suite.nomadBin, name, dir, hcl, ports[0])
	if err != nil {
		return nil, err
	}
	suite.mu.Lock()
	suite.clients = append(suite.clients, a)
	suite.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := waitNode(ctx, suite.api, name)
	if err != nil {
		return a, fmt.Errorf("%w; the agent's log:\n%s", err, tail(filepath.Join(dir, "agent.log"), 20))
	}
	a.allocatable = allocatableOf(n)
	return a, nil
}

// tearDown purges every job of the suite's server, waits for their
// containers to go, stops the agents by PID, unmounts what the clients left
// mounted, removes leftover containers of the suite's allocations and the
// suite's directory.
func tearDown() {
	if suite.server == nil {
		if suite.dir != "" {
			_ = os.RemoveAll(suite.dir)
		}
		return
	}
	allocs := map[string]bool{}
	if suite.api != nil {
		q := &api.QueryOptions{Namespace: "*"}
		if list, _, err := suite.api.Allocations().List(q); err == nil {
			for _, a := range list {
				allocs[a.ID] = true
			}
		}
		if jobs, _, err := suite.api.Jobs().List(q); err == nil {
			for _, j := range jobs {
				_, _, _ = suite.api.Jobs().Deregister(j.ID, true, &api.WriteOptions{Namespace: j.Namespace})
			}
		}
		waitContainersGone(allocs, 20*time.Second)
	}
	suite.mu.Lock()
	clients := suite.clients
	suite.mu.Unlock()
	for _, c := range clients {
		c.stop()
	}
	suite.server.stop()
	for _, c := range clients {
		unmountUnder(c.dir)
	}
	removeContainers(allocs)
	if os.Getenv("SANDGATE_E2E_KEEP") == "" {
		_ = os.RemoveAll(suite.dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: kept %s\n", suite.dir)
	}
}

// suiteContainers lists the containers of the given allocations (Nomad
// labels each with com.hashicorp.nomad.alloc_id).
func suiteContainers(allocs map[string]bool) []string {
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=com.hashicorp.nomad.alloc_id",
		"--format", `{{.ID}} {{.Label "com.hashicorp.nomad.alloc_id"}}`).Output()
	if err != nil {
		return nil
	}
	var ids []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		id, alloc, ok := strings.Cut(line, " ")
		if ok && allocs[alloc] {
			ids = append(ids, id)
		}
	}
	return ids
}

func waitContainersGone(allocs map[string]bool, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && len(suiteContainers(allocs)) > 0 {
		time.Sleep(300 * time.Millisecond)
	}
}

func removeContainers(allocs map[string]bool) {
	if ids := suiteContainers(allocs); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run() //nolint:gosec // G204: container ids docker listed
	}
}
