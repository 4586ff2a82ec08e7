package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/gateway/testhook"
	"sandgate/store"
	"sandgate/store/bolt"
)

// hookedGateway is the sandgate binary built with the test hooks
// (gateway/testhook), once for the suite.
var hookedGateway = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(suite.dir, "sandgate-testhooks")
	cmd := exec.Command("go", "build", "-tags", "sandgate_testhooks", "-o", bin, "./cmd/sandgate") //nolint:gosec // G204: the suite builds the product
	cmd.Dir = suite.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags sandgate_testhooks: %w\n%s", err, out)
	}
	return bin, nil
})

// TestAGatewayKilledAtEveryStepLeavesNothingBehind is test/crash's loop on
// the real agent, each point once: the gateway pauses at the point, is
// killed with SIGKILL, restarted on its data dir, and its records, the
// real jobs and its budgets must agree (checkConsistent); then every
// sandbox the crash left is destroyed. At the end the store's budget use
// per node and per principal is its live records'.
func TestAGatewayKilledAtEveryStepLeavesNothingBehind(t *testing.T) {
	need(t)
	t.Parallel()
	bin, err := hookedGateway()
	if err != nil {
		t.Fatal(err)
	}
	pauseFile := filepath.Join(t.TempDir(), "pause")
	g := startGateway(t, gwOptions{Binary: bin, Env: []string{testhook.EnvPauseFile + "=" + pauseFile}})
	arm := func(p testhook.Point) {
		if err := os.WriteFile(pauseFile, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range testhook.Points {
		arm(p)
		if got := g.driveToPause(t, p); got != p {
			t.Fatalf("armed %s: a create and a destroy passed it without pausing", p)
		}
		g.kill9()
		arm("")
		g.start(t)
		checkConsistent(t, g, "after a kill at "+string(p))
		r := g.api(t).Do(http.MethodGet, "/v1/sandboxes", g.operator, nil)
		var list struct {
			Sandboxes []struct {
				ID string `json:"id"`
			} `json:"sandboxes"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil {
			t.Fatalf("list: %v: %s", err, r)
		}
		for _, sb := range list.Sandboxes {
			if r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+sb.ID, g.operator, nil); r.Status != http.StatusNoContent {
				t.Fatalf("destroy %s after a kill at %s: %s", sb.ID, p, r)
			}
		}
		checkConsistent(t, g, "after the clean-up of a kill at "+string(p))
	}
	g.stop()
	checkStoreBudgets(t, g.dir, sharedNode)
}

// driveToPause sends a create and, when it answers, a destroy of its
// sandbox with the session token, and returns the point the gateway
// paused at ("" when both answered).
func (g *gw) driveToPause(t *testing.T, p testhook.Point) testhook.Point {
	t.Helper()
	line := testhook.PausedLine(p)
	seen := strings.Count(g.logText(), line)
	send := func(method, path, tok string, body any) (<-chan apitest.Reply, func() bool) {
		answer := make(chan apitest.Reply, 1)
		go func() {
			r, _ := g.api(t).Send(apitest.Request{Method: method, Path: path, Token: tok, Body: body}) // a zero Reply when none came
			answer <- r
		}()
		return answer, func() bool { return strings.Count(g.logText(), line) > seen }
	}
	wait := func(answer <-chan apitest.Reply, paused func() bool) (apitest.Reply, bool) {
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
			select {
			case r := <-answer:
				return r, paused()
			case <-time.After(50 * time.Millisecond):
				if paused() {
					return apitest.Reply{}, true
				}
			}
		}
		t.Fatalf("neither an answer nor %q within 3 minutes", line)
		return apitest.Reply{}, false
	}
	r, paused := wait(send(http.MethodPost, "/v1/sandboxes", g.operator,
		map[string]any{"node": sharedNode, "image": imageBusybox, "cpu_mhz": 100, "memory_mb": 128}))
	if paused {
		return p
	}
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	m := r.JSON(t)
	id, _ := m["id"].(string)
	session, _ := m["token"].(string)
	if m["state"] != "running" || session == "" {
		t.Fatalf("create: %s", r)
	}
	r, paused = wait(send(http.MethodDelete, "/v1/sandboxes/"+id, session, nil))
	if paused {
		return p
	}
	if r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %s", r)
	}
	return ""
}

// errProbe aborts the reservation that reads a principal's budget use.
var errProbe = errors.New("probe: read the use and write nothing")

// checkStoreBudgets opens the stopped gateway's store and checks the
// budget use of node and of every principal against the sum over the live
// records.
func checkStoreBudgets(t *testing.T, dir, node string) {
	t.Helper()
	ctx := t.Context()
	st, err := bolt.Open(filepath.Join(dir, "sandgate.db"), bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	all, err := st.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byNode, byPrincipal := store.Usage{}, map[string]store.Usage{}
	for _, r := range all {
		u := byPrincipal[r.Principal]
		if r.State.Live() {
			u.Sandboxes++
			u.CPUMHz += r.CPUMHz
			u.MemoryMB += r.MemoryMB
			byNode.Sandboxes++
			byNode.CPUMHz += r.CPUMHz
			byNode.MemoryMB += r.MemoryMB
		}
		byPrincipal[r.Principal] = u
	}
	if got, err := st.NodeUsage(ctx, node); err != nil || got != byNode {
		t.Errorf("node %s holds %+v (%v), its live records %+v", node, got, err, byNode)
	}
	for p, want := range byPrincipal {
		var got store.Usage
		err := st.Reserve(ctx, store.Sandbox{ID: "e2e-probe", JobID: "sandgate-sbx-e2e-probe", Node: node, Principal: p, State: store.StateStarting},
			func(f store.ReserveFacts) error { got = f.Principal; return errProbe })
		if !errors.Is(err, errProbe) || got != want {
			t.Errorf("principal %s holds %+v (%v), its live records %+v", p, got, err, want)
		}
	}
}
