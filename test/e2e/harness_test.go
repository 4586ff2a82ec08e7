package e2e

import (
	"context"
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

	"github.com/hashicorp/nomad/api"

	"sandgate/nomad/localnomad"
	"sandgate/policies/datapatch"
)

// The suite's local images (deploy/images/build.sh builds them once).
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
	gateway   string              // the sandgate binary
	policyDir string              // the embedded bundle with the e2e data patch
	dir       string              // everything the suite writes
	cluster   *localnomad.Cluster // the server agent and every client agent
	server    *agent              // cluster.Server
	worker    *agent              // the shared client node "worker-1"
	api       *api.Client         // cluster.API
	seq       atomic.Int64
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
	if _, err := localnomad.FirstInterface(); err != nil {
		return skipError{"skipped: " + err.Error()}
	}
	var err error
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
	script := filepath.Join(suite.root, "deploy", "images", "build.sh")
	cmd := exec.Command("bash", script, "busybox="+imageBusybox, "debian="+imageDebian) //nolint:gosec // G204: the suite's own script
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
	merged, err := datapatch.Apply(data, patch)
	if err != nil {
		return err
	}
	return os.WriteFile(dataFile, merged, 0o600) //nolint:gosec // G703: the suite's own copy of the bundle
}

func startServer() error {
	c, err := localnomad.Start(context.Background(), suite.nomadBin, suite.dir)
	if err != nil {
		return err
	}
	suite.cluster, suite.server, suite.api = c, c.Server, c.API
	return nil
}

// startClient starts a client-only agent named name, with the given node
// meta, and waits until its node is ready with a healthy docker driver.
func startClient(name string, meta ...string) (*agent, error) {
	a, err := suite.cluster.StartClient(context.Background(), name, meta...)
	if err != nil {
		return a, err
	}
	n, err := localnomad.WaitNode(context.Background(), suite.api, name)
	if err != nil {
		return a, err
	}
	allocatables.Store(a, allocatableOf(n))
	return a, nil
}

// tearDown purges every job of the suite's server, stops the agents,
// unmounts what the clients left mounted, removes leftover containers of
// the suite's allocations (localnomad's Close) and the suite's directory.
func tearDown() {
	if suite.cluster != nil {
		suite.cluster.Close()
	}
	if suite.dir == "" {
		return
	}
	if suite.cluster == nil || os.Getenv("SANDGATE_E2E_KEEP") == "" {
		_ = os.RemoveAll(suite.dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: kept %s\n", suite.dir)
	}
}
