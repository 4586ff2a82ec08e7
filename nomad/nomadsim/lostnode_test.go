package nomadsim

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/render/execwrap"
)

// The lost-node behaviour beyond what real-lost-*.json recorded: nodes
// other than the pinned one, batch allocations that ended, stats.

func TestALostAllocationIsReplacedAtOnceWhereAnotherNodeFits(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	job := sandboxJob("roams", "worker-1")
	job.Constraints = job.Constraints[:2] // kernel and arch only: any worker fits
	job.Constrain(api.NewConstraint("${node.unique.name}", "!=", "control-1"))
	old := runningAlloc(t, c, job)
	must(t, s.SetNodeStatus(old.NodeName, "down"))
	var replacement *api.AllocationListStub
	waitFor(t, "a replacement running on the other worker", func() bool {
		stubs, _, err := c.Jobs().Allocations("roams", true, nil)
		for _, st := range stubs {
			if err == nil && st.ID != old.ID && st.ClientStatus == "running" {
				replacement = st
			}
		}
		return replacement != nil
	})
	if replacement.NodeName == old.NodeName {
		t.Errorf("replacement on %s, the node that is down", replacement.NodeName)
	}
	evals, _, err := c.Jobs().Evaluations("roams", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evals {
		if e.Status == "blocked" || e.FailedTGAllocs != nil {
			t.Errorf("eval %s %s %s failed %v: nothing should block", e.ID, e.TriggeredBy, e.Status, e.FailedTGAllocs)
		}
	}
	if j, _, _ := c.Jobs().Info("roams", nil); *j.Status != "running" {
		t.Errorf("job %s, want running", *j.Status)
	}
	// Back up: the old allocation's task is stopped; nothing else is placed.
	must(t, s.SetNodeStatus(old.NodeName, "ready"))
	a, _, _ := c.Allocations().Info(old.ID, nil)
	if a.ClientStatus != "complete" || a.DesiredDescription != descLost || a.TaskStates["sandbox"].State != "dead" {
		t.Errorf("old alloc %s %q task %s, want complete, lost, dead", a.ClientStatus, a.DesiredDescription, a.TaskStates["sandbox"].State)
	}
	if stubs, _, _ := c.Jobs().Allocations("roams", true, nil); len(stubs) != 2 {
		t.Errorf("%d allocations after the node came back, want 2", len(stubs))
	}
}

func TestAFinishedBatchAllocationIsNotRunAgainWhenItsNodeComesBack(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	job := hardenedJob("refused", map[string]string{"nofile": "1024:1024"}, nil) // fails at start
	register(t, c, job)
	waitFor(t, "the allocation failed", func() bool {
		stubs, _, err := c.Jobs().Allocations("refused", true, nil)
		return err == nil && len(stubs) == 1 && stubs[0].ClientStatus == "failed"
	})
	must(t, s.SetNodeStatus("worker-1", "down"))
	must(t, s.SetNodeStatus("worker-1", "ready"))
	time.Sleep(50 * time.Millisecond)
	stubs, _, _ := c.Jobs().Allocations("refused", true, nil)
	if len(stubs) != 1 || stubs[0].ClientStatus != "failed" || stubs[0].DesiredStatus != "run" {
		t.Errorf("allocations %+v, want the one failed allocation untouched", stubs)
	}
}

func TestClientEndpointsOfADownNodeSayNoPathToNode(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t)
	alloc := runningAlloc(t, c, sandboxJob("gone", "worker-1"))
	must(t, s.SetNodeStatus("worker-1", "down"))
	if r := do(t, http.MethodGet, url+"/v1/client/allocation/"+alloc.ID+"/stats", nil); r.status != http.StatusNotFound || string(r.body) != errNoPathToNode {
		t.Errorf("stats: %d %q", r.status, r.body)
	}
	if r := do(t, http.MethodGet, url+"/v1/client/fs/logs/"+alloc.ID+"?task=sandbox&type=stdout&plain=true", nil); r.status != http.StatusNotFound || string(r.body) != errNoPathToNode {
		t.Errorf("logs: %d %q", r.status, r.body)
	}
	n, _, _ := c.Nodes().Info(alloc.NodeID, nil)
	if last := n.Events[len(n.Events)-1]; last.Message != msgHeartbeatMissed || last.Subsystem != subsystemCluster {
		t.Errorf("last node event %+v", last)
	}
}

func TestTasksLogABannerUnlessQuiet(t *testing.T) {
	t.Parallel()
	for _, quiet := range []bool{false, true} {
		s, url, c := newSim(t, func(c *Config) { c.QuietTasks = quiet })
		alloc := runningAlloc(t, c, sandboxJob("b", "worker-1"))
		r := do(t, http.MethodGet, url+"/v1/client/fs/logs/"+alloc.ID+"?task=sandbox&type=stdout&plain=true", nil)
		if want := map[bool]string{false: taskStartedLine, true: ""}[quiet]; string(r.body) != want {
			t.Errorf("quiet %v: log %q, want %q", quiet, r.body, want)
		}
		_ = s
	}
}

func TestTheSimulatedShellRunsBackgroundCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string
		code         int
		stdout       string
	}{
		{"a background command beside a foreground one", "yes > /dev/null & echo hi", 0, "hi\n"},
		{"a background command's output", "echo bg & sleep 0.05; echo fg", 0, "bg\nfg\n"},
		{"a lone & is refused", "& echo hi", 127, ""},
		{"&& still chains", "true && echo ok", 0, "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, _ := run(context.Background(), []string{"sh", "-c", tc.script}, "")
			if code != tc.code || stdout != tc.stdout {
				t.Errorf("exit %d stdout %q, want %d %q", code, stdout, tc.code, tc.stdout)
			}
		})
	}
	// Under the exec wrapper's timeout the background child dies too.
	start := time.Now()
	argv := execwrap.Command{Argv: []string{"sh", "-c", "yes > /dev/null & sleep 30"}, Timeout: time.Second, KillAfter: time.Second}.Args()
	if code, _, stderr := run(context.Background(), argv, ""); code != exitTerminated || time.Since(start) > 5*time.Second {
		t.Errorf("timed out: exit %d after %s (%q), want %d", code, time.Since(start), stderr, exitTerminated)
	}
}

func TestBusyboxTasksWordNotFoundAsBusybox(t *testing.T) {
	t.Parallel()
	for image, want := range map[string]bool{
		"sandgate-e2e/busybox:1": true, "busybox": true, "docker.io/library/busybox:1.36": true,
		"debian:12": false, "ubuntu:24.04": false,
	} {
		task := api.NewTask("t", "docker").SetConfig("image", image)
		if got := busyboxImage(task); got != want {
			t.Errorf("%s: busybox %v, want %v", image, got, want)
		}
	}
	if busyboxImage(api.NewTask("t", "raw_exec").SetConfig("image", "busybox")) {
		t.Error("a raw_exec task is not an image")
	}
}
