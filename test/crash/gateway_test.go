package crash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/client"
	"sandgate/gateway/testhook"
	"sandgate/test/testbin"
)

// hookTag is the build tag that compiles the pause points in.
const hookTag = "sandgate_testhooks"

// build compiles ./cmd/sandgate into dir with the given build tags.
func build(dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "sandgate")
	_, file, _, _ := runtime.Caller(0)
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/sandgate")...) //nolint:gosec // G204: the test builds the product
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %v: %w\n%s", tags, err, out)
	}
	return bin, nil
}

// hookedBinary is the sandgate binary built with the test hooks, once for
// the package's tests.
var hookedBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sandgate-crash-")
	if err != nil {
		return "", err
	}
	return build(dir, hookTag)
})

// gateway is one `sandgate serve` with its data dir, started and killed
// again and again.
type gateway struct {
	t         testing.TB
	bin       string
	dir       string
	dsn       string // the PostgreSQL store's; "": the data dir's bbolt file
	config    string
	pauseFile string
	url       string
	operator  string

	proc   testbin.Serve // every process's standard error is its log
	mu     sync.Mutex
	paused chan testhook.Point // the pause lines of the current process
}

// newGateway writes the configuration of a gateway on the simulator at
// nomadAddr, enrolling node, and mints its operator token offline.
func newGateway(t testing.TB, bin, nomadAddr, node, dsn string) *gateway {
	t.Helper()
	g := &gateway{t: t, bin: bin, dir: t.TempDir(), dsn: dsn}
	g.pauseFile = filepath.Join(g.dir, "testhook.pause")
	cfg := map[string]any{
		"listen":   "127.0.0.1:0",
		"data_dir": g.dir,
		"nomad":    map[string]any{"address": nomadAddr, "timeout": "3s"},
		// The recovery under test is the reconciliation every start runs
		// (and the watch of a starting sandbox it hands over to). A
		// periodic pass could also end a record whose job a paused
		// destroy has just purged, before the kill: the crash state the
		// test checks would no longer be the point's, so there is none
		// within the test. The other loops run.
		"reaper_interval":    "1s",
		"reconcile_interval": "1h",
		"reclaim_interval":   "1s",
		"nodes":              []map[string]any{{"name": node, "max_sandboxes": 20, "cpu_mhz": 4000, "memory_mb": 8192}},
	}
	// One name for every restart, as a replica keeps its name: a
	// restarted replica knows the starting records of its dead process
	// for its own (on a shared store, another replica's are left alone
	// while their create may be in flight).
	cfg["replica"] = "crash-gateway"
	store := []string{}
	if dsn != "" {
		cfg["store"] = map[string]any{"driver": "postgres", "dsn": dsn}
		store = []string{"--store", "postgres:" + dsn}
	}
	b, _ := json.Marshal(cfg)
	g.config = filepath.Join(g.dir, "serve.json")
	if err := os.WriteFile(g.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"token", "mint", "--offline", "--role", "operator", "--subject", "crash-operator", //nolint:gosec // G204: the binary the test built
		"--ttl", "2h", "--data", g.dir}, store...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token mint: %v\n%s", err, stderr.String())
	}
	g.operator = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("gateway log (%s):\n%s", g.dir, g.logText())
		}
	})
	return g
}

// start runs the gateway, with point armed for its whole life when it is
// not empty, and waits until it listens. The pause file is always armed
// through the environment: what it holds decides.
func (g *gateway) start(point testhook.Point) {
	g.t.Helper()
	cmd := exec.Command(g.bin, "serve", "--config", g.config) //nolint:gosec // G204: the binary the test built
	// A start is CPU bound (the policy bundle is compiled), and half of
	// that is collecting the compile's garbage: each process lives for one
	// cycle, so it collects only past 256 MiB (one compile peaks near
	// 90 MiB). The test starts a hundred of them.
	cmd.Env = append(os.Environ(), testhook.EnvPauseFile+"="+g.pauseFile, "GOGC=off", "GOMEMLIMIT=256MiB")
	if point != "" {
		cmd.Env = append(cmd.Env, testhook.EnvPause+"="+string(point))
	}
	paused := make(chan testhook.Point, 8)
	g.mu.Lock()
	g.paused = paused
	g.mu.Unlock()
	g.url = "http://" + g.proc.Start(g.t, cmd, 60*time.Second, func(line string) {
		if p, ok := strings.CutPrefix(line, testhook.PausedLine("")); ok {
			paused <- testhook.Point(p)
		}
	})
}

// kill9 ends the process with SIGKILL: no shutdown code runs.
func (g *gateway) kill9() { g.proc.Signal(os.Kill, 20*time.Second) }

// stop ends the process with SIGINT, as an operator would.
func (g *gateway) stop() { g.proc.Signal(os.Interrupt, 20*time.Second) }

// arm makes the running process pause at p (disarm with "").
func (g *gateway) arm(p testhook.Point) {
	g.t.Helper()
	if err := os.WriteFile(g.pauseFile, []byte(p), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

// pausedAt returns the point the process paused at, or "" when done is
// closed first (the request that was to reach a point answered).
func (g *gateway) pausedAt(done <-chan struct{}) testhook.Point {
	g.mu.Lock()
	paused := g.paused
	g.mu.Unlock()
	select {
	case p := <-paused:
		return p
	case <-done:
		select { // the answer and the pause line may arrive together
		case p := <-paused:
			return p
		default:
			return ""
		}
	case <-time.After(30 * time.Second):
		g.t.Fatalf("neither a pause line nor an answer within 30 s:\n%s", g.logText())
		return ""
	}
}

func (g *gateway) logText() string { return g.proc.Log() }

// client is an API client of the running process with tok.
func (g *gateway) client(tok string) *client.Client {
	g.t.Helper()
	c, err := client.New(client.Config{Addr: g.url, Token: tok})
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// call runs f against the running process in the background and returns
// a channel closed when it returned.
func call(f func(ctx context.Context)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		f(ctx)
	}()
	return done
}
