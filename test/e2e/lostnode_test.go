package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/gateway/apitest"
)

// TestALostNode kills a node's client agent past its heartbeat TTL and
// restarts it. While it is down, exec and logs answer 503
// nomad_unavailable with Retry-After (never "gone", never a made-up exit).
// When Nomad has replaced the allocation by a new, empty container, the
// gateway ends the sandbox (reason lost, a clear last_error), releases its
// budget and purges the job; it never keeps answering running while every
// exec fails.
func TestALostNode(t *testing.T) {
	need(t)
	t.Parallel()
	const node = "worker-lost"
	a, g := ownNode(t, gwNode{Name: node})
	sb := g.create(t, g.operator, map[string]any{"node": node, "image": imageBusybox})
	g.sh(t, sb.ID, sb.Token, "echo state > /workspace/mark")

	a.Kill()
	unavailable := func(when string) {
		t.Helper()
		r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", sb.Token, map[string]any{"argv": []string{"cat", "/workspace/mark"}})
		apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "nomad_unavailable")
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: a 503 without Retry-After: %s", when, r)
		}
		r = g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+sb.ID+"/logs", sb.Token, nil)
		apitest.ExpectProblem(t, r, http.StatusServiceUnavailable, "nomad_unavailable")
	}
	unavailable("right after the agent died")
	n, _, err := suite.api.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	var nodeID string
	for _, x := range n {
		if x.Name == node {
			nodeID = x.ID
		}
	}
	eventually(t, 60*time.Second, "Nomad marks the node down", func() bool {
		info, _, err := suite.api.Nodes().Info(nodeID, nil)
		return err == nil && info.Status == api.NodeStatusDown
	})
	unavailable("with the node down")
	if st := g.status(t, sb.ID); st["state"] != "running" {
		t.Fatalf("while the node is down (it may come back): %v", st)
	}

	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the gateway ends the sandbox whose allocation Nomad replaced", func() bool {
		st := g.status(t, sb.ID)
		return st["state"] == "ended"
	})
	st := g.status(t, sb.ID)
	t.Logf("the lost sandbox: end_reason %v, last_error %q", st["end_reason"], st["last_error"])
	if st["end_reason"] != "lost" || !strings.Contains(st["last_error"].(string), "allocation") {
		t.Fatalf("the lost sandbox: %v", st)
	}
	if got := g.hostUse(t, node); got != [3]int64{} {
		t.Fatalf("budget use after the loss: %v", got)
	}
	if jobs := g.jobs(t); len(jobs) != 0 {
		t.Fatalf("jobs left after the loss: %v", jobs)
	}
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", g.operator, map[string]any{"argv": []string{"true"}})
	if r.Status < 400 || r.Status >= 500 {
		t.Fatalf("exec on the lost sandbox: %s", r)
	}
	eventually(t, 60*time.Second, "the lost sandbox's containers removed", func() bool { return containersOf(sb.ID) == 0 })
}
