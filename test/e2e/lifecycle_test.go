package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway/apitest"
	"sandgate/nomad/localnomad"
)

// TestExpiryIsRefusedAtAuthorizationThenReaped: past its TTL a sandbox is
// refused by the policy (T3) while its record is still live, and the next
// reaper pass purges it. The reaper runs every 30 s from the gateway's
// start, and the sandbox's 60 s TTL ends between two passes.
func TestExpiryIsRefusedAtAuthorizationThenReaped(t *testing.T) {
	need(t)
	t.Parallel()
	g := startGateway(t, gwOptions{ReaperInterval: "30s"})
	started := time.Now()
	// Created 8 s after the start, it expires at about +68 s: after the
	// reaper's pass at +60 s, long before the one at +90 s.
	time.Sleep(8 * time.Second)
	sb := g.create(t, g.operator, map[string]any{"image": imageBusybox, "ttl_seconds": 60})
	expires, err := time.Parse(time.RFC3339, sb.Body["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if since := expires.Sub(started); since < 63*time.Second || since > 85*time.Second {
		t.Fatalf("expiry %s after the gateway's start: the reaper pass at +60 s would race the check", since)
	}
	time.Sleep(time.Until(expires) + 1500*time.Millisecond)
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", sb.Token, map[string]any{"argv": []string{"true"}})
	if m := apitest.ExpectProblem(t, r, http.StatusGone, "sandbox_expired"); !slices.Contains(toStrings(m["rule_ids"]), "T3") {
		t.Fatalf("exec past expiry: want T3, got %s", r)
	}
	if st := g.status(t, sb.ID); st["state"] != "running" {
		t.Fatalf("the refusal came from the reaper, not from authorization: %v", st)
	}
	eventually(t, 40*time.Second, "the reaper ends the expired sandbox", func() bool {
		st := g.status(t, sb.ID)
		return st["state"] == "ended" && st["end_reason"] == "expired"
	})
	if jobs := g.jobs(t); len(jobs) != 0 {
		t.Fatalf("jobs left after the reaper: %v", jobs)
	}
	eventually(t, 30*time.Second, "the expired sandbox's container removed", func() bool { return containersOf(sb.ID) == 0 })
}

// TestAGatewayKilledDuringACreateLeavesNothingBehind sends a create, kills
// the gateway with SIGKILL at several moments of it, restarts it on the
// same data dir, and checks: no orphan prefixed job, no ghost record, node
// budget use equal to the live records.
func TestAGatewayKilledDuringACreateLeavesNothingBehind(t *testing.T) {
	need(t)
	t.Parallel()
	g := startGateway(t, gwOptions{})
	for _, delay := range []time.Duration{0, 30 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, 3 * time.Second} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			b, _ := json.Marshal(map[string]any{"node": sharedNode, "image": imageBusybox, "cpu_mhz": 100, "memory_mb": 128})
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, g.url+"/v1/sandboxes", strings.NewReader(string(b)))
			req.Header.Set("Authorization", "Bearer "+g.operator)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
		time.Sleep(delay)
		g.kill9()
		<-done
		g.start(t)
		checkConsistent(t, g, fmt.Sprintf("after a kill %s into a create", delay))
	}
}

// checkConsistent waits until the gateway's records and Nomad agree: every
// prefixed job belongs to a live record, every live record has its job and
// is running (a starting one is settled by the restart), and the shared
// node's budget use is the sum of the live records.
func checkConsistent(t *testing.T, g *gw, when string) {
	t.Helper()
	checkConsistentOn(t, g, sharedNode, when)
}

// checkConsistentOn is checkConsistent for the node the gateway places on.
func checkConsistentOn(t *testing.T, g *gw, node, when string) {
	t.Helper()
	var last string
	agree := func() bool {
		r := g.api(t).Do(http.MethodGet, "/v1/sandboxes", g.operator, nil)
		if r.Status != http.StatusOK {
			last = r.String()
			return false
		}
		var list struct {
			Sandboxes []map[string]any `json:"sandboxes"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil {
			last = err.Error()
			return false
		}
		var liveJobs []string
		var cpu, mem, n int64
		for _, sb := range list.Sandboxes {
			switch sb["state"] {
			case "starting":
				last = "a sandbox is still starting"
				return false
			case "running":
				liveJobs = append(liveJobs, "sandgate-sbx-"+sb["id"].(string))
				n++
				cpu += int64(sb["cpu_mhz"].(float64))
				mem += int64(sb["memory_mb"].(float64))
			}
		}
		jobs := g.jobs(t)
		slices.Sort(jobs)
		slices.Sort(liveJobs)
		if !slices.Equal(jobs, liveJobs) {
			last = fmt.Sprintf("jobs %v, live records %v", jobs, liveJobs)
			return false
		}
		used := g.hostUse(t, node)
		if used != [3]int64{n, cpu, mem} {
			last = fmt.Sprintf("budget use %v, live records %v", used, [3]int64{n, cpu, mem})
			return false
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !agree(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 60 s: %s: records, jobs and budgets agree (last: %s)", when, last)
		}
	}
}

// hostUse is a node's budget use as GET /v1/hosts reports it: sandboxes,
// cpu_mhz, memory_mb.
func (g *gw) hostUse(t *testing.T, node string) [3]int64 {
	t.Helper()
	r := g.api(t).Do(http.MethodGet, "/v1/hosts", g.operator, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("hosts: %s", r)
	}
	var hosts struct {
		Hosts []struct {
			Name   string `json:"name"`
			Budget struct {
				Used struct {
					Sandboxes int64 `json:"sandboxes"`
					CPUMHz    int64 `json:"cpu_mhz"`
					MemoryMB  int64 `json:"memory_mb"`
				} `json:"used"`
			} `json:"budget"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(r.Body, &hosts); err != nil {
		t.Fatalf("hosts: %v: %s", err, r.Body)
	}
	for _, h := range hosts.Hosts {
		if h.Name == node {
			return [3]int64{h.Budget.Used.Sandboxes, h.Budget.Used.CPUMHz, h.Budget.Used.MemoryMB}
		}
	}
	t.Fatalf("hosts lists no %s: %s", node, r.Body)
	return [3]int64{}
}

// TestADrainedNodeIsReclaimed: a Nomad drain of a node holding a sandbox
// makes the usage monitor reclaim it (R2): ended, purged, budget released.
func TestADrainedNodeIsReclaimed(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-drain"
	_, g := ownNode(t, gwNode{Name: node})
	sb := g.create(t, g.operator, map[string]any{"node": node, "image": imageBusybox})
	if got := g.hostUse(t, node); got != [3]int64{1, 100, 128} {
		t.Fatalf("budget use before the drain: %v", got)
	}
	n, err := localnomad.WaitNode(t.Context(), suite.api, node)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := suite.api.Nodes().UpdateDrain(n.ID, &api.DrainSpec{Deadline: time.Minute}, false, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	eventually(t, 30*time.Second, "the drain reclaims the sandbox (R2)", func() bool {
		st := g.status(t, sb.ID)
		return st["state"] == "ended" && st["end_reason"] == "reclaimed"
	})
	if got := g.hostUse(t, node); got != [3]int64{} {
		t.Fatalf("budget use after the reclaim: %v", got)
	}
	if jobs := g.jobs(t); len(jobs) != 0 {
		t.Fatalf("jobs left after the reclaim: %v", jobs)
	}
	if !strings.Contains(g.logText(), "R2") {
		t.Errorf("the gateway log does not name R2:\n%s", g.logText())
	}
}

// TestATaskThatCannotStartSaysWhy: a node enrolled for egress whose host
// lacks the isolation bundle's Docker network (an operator's mistake the
// policy cannot see: the node's meta claims the bundle) fails the task at
// start; the create answers 503 placement_failed (never a 201) with the
// driver's own message in detail, not "Policy allows no restarts"; the
// record fails with it in last_error, and its budget is released.
func TestATaskThatCannotStartSaysWhy(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-egress"
	_, g := ownNode(t, gwNode{Name: node, Egress: true}, `    "sandgate.isolation" = "v1"`)
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes", g.operator, map[string]any{
		"node": node, "network": "egress", "image": imageBusybox, "cpu_mhz": 100, "memory_mb": 128})
	m := r.JSON(t)
	if r.Status != http.StatusServiceUnavailable || m["code"] != "placement_failed" || m["token"] != nil || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a sandbox that cannot start: %s", r)
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, "sandgate-egress") {
		t.Fatalf("detail does not carry the driver's reason: %q", d)
	}
	rec := g.status(t, m["sandbox_id"].(string))
	if rec["state"] != "failed" || rec["end_reason"] != "placement_failed" {
		t.Fatalf("the record of a sandbox that cannot start: %v", rec)
	}
	msg, _ := rec["last_error"].(string)
	if !strings.Contains(msg, "sandgate-egress") || strings.Contains(msg, "Policy allows no restarts") {
		t.Fatalf("last_error does not carry the driver's reason: %q", msg)
	}
	t.Logf("last_error: %s", msg)
	if got := g.hostUse(t, node); got != [3]int64{} {
		t.Fatalf("budget use after the failed start: %v", got)
	}
	if jobs := g.jobs(t); len(jobs) != 0 {
		t.Fatalf("jobs left after the failed start: %v", jobs)
	}
}
