package nomadsim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// realStep is one step of a recorded script: a fixture replayed and
// compared, or an action on the simulator standing for what the recorder
// did between fixtures.
type realStep struct {
	fixture string
	action  func(r *realReplay)
	// replay, when set, replaces the usual replay of fixture.
	replay func(r *realReplay, rec *realRec)
}

func fixtures(names ...string) []realStep {
	out := make([]realStep, len(names))
	for i, n := range names {
		out[i] = realStep{fixture: n}
	}
	return out
}

func action(fn func(r *realReplay)) []realStep { return []realStep{{action: fn}} }

// waitFirst maps the allocation a fixture's notes name to the simulator's
// allocation of the same job, once it reaches status.
func waitFirst(fixture, status string) []realStep {
	return action(func(r *realReplay) {
		n := loadReal(r.t, fixture).notes
		r.waitAlloc(n.AllocID, n.JobID, status)
	})
}

// sharedNodeScript is the recorder's run on the shared node worker-1: a
// rendered docker sandbox job on busybox and on Debian, its logs, execs
// through the gateway's wrapper, unknown allocations, a ulimit object the
// driver refuses, and purge.
var sharedNodeScript = slices.Concat(
	fixtures("real-docker-job-register"),
	waitFirst("real-docker-job-allocations-running", "running"),
	fixtures("real-docker-job-allocations-running", "real-docker-allocation-running", "real-docker-job-running",
		"real-debian-job-register"),
	waitFirst("real-debian-allocation-running", "running"),
	fixtures("real-debian-allocation-running", "real-logs-empty-framed", "real-logs-empty-plain",
		"real-exec-busybox-echo-hi", "real-exec-busybox-exit3", "real-exec-busybox-not-found",
		"real-exec-busybox-cat-stdin", "real-exec-busybox-timeout",
		"real-exec-debian-echo-hi", "real-exec-debian-exit3", "real-exec-debian-not-found",
		"real-exec-debian-cat-stdin", "real-exec-debian-timeout"),
	// Recorded later, in a run of their own (-record-only): their
	// allocations are mapped to the same jobs' allocations here.
	waitFirst("real-exec-busybox-missing-workdir", "running"),
	waitFirst("real-exec-debian-missing-workdir", "running"),
	fixtures("real-exec-busybox-missing-workdir", "real-exec-debian-missing-workdir"),
	action(func(r *realReplay) { r.appendLogs(loadReal(r.t, "real-logs-stdout-framed").notes.AllocID) }),
	fixtures("real-logs-stdout-framed", "real-logs-stdout-end-offset5-framed", "real-logs-stdout-start-plain",
		"real-logs-stderr-framed", "real-exec-unknown-alloc", "real-logs-unknown-alloc", "real-allocation-unknown",
		"real-ulimit-object-job-register"),
	waitFirst("real-ulimit-object-allocation", "failed"),
	fixtures("real-ulimit-object-job-allocations", "real-ulimit-object-allocation", "real-ulimit-object-job",
		"real-docker-job-purge", "real-docker-job-after-purge"),
	action(func(r *realReplay) {
		n := loadReal(r.t, "real-docker-allocation-after-purge").notes
		waitFor(r.t, "the purged allocation complete", func() bool {
			a, _, err := r.c.Allocations().Info(r.ids[n.AllocID], nil)
			return err == nil && a.ClientStatus == "complete"
		})
	}),
	fixtures("real-docker-allocation-after-purge", "real-exec-purged-alloc", "real-logs-purged-alloc"),
)

// lostNodeScript is the recorder's run on its own client agent rec-lost:
// a sandbox running, the agent killed (SIGKILL) until the servers mark the
// node down, then restarted on its data dir. SetNodeStatus stands for both.
var lostNodeScript = slices.Concat(
	fixtures("real-lost-job-register"),
	waitFirst("real-lost-allocation-running", "running"),
	fixtures("real-lost-allocation-running"),
	// An exec runs when the agent is killed: the node goes down under it.
	[]realStep{{fixture: "real-lost-exec-in-flight", replay: func(r *realReplay, rec *realRec) {
		c := r.startExec(rec, r.translate(rec.Request.Path))
		time.Sleep(50 * time.Millisecond)
		must(r.t, r.s.SetNodeStatus("rec-lost", "down"))
		r.compareExec(rec, c.rest())
	}}},
	fixtures("real-lost-node-down", "real-lost-allocation-node-down", "real-lost-job-allocations-node-down",
		"real-lost-job-evaluations-node-down", "real-lost-job-node-down", "real-lost-exec-node-down",
		"real-lost-logs-node-down"),
	action(func(r *realReplay) {
		must(r.t, r.s.SetNodeStatus("rec-lost", "ready"))
		n := loadReal(r.t, "real-lost-job-allocations-after-restart").notes
		r.waitAlloc(n.Replacement, n.JobID, "running", r.ids[n.AllocID])
	}),
	fixtures("real-lost-node-after-restart", "real-lost-job-allocations-after-restart",
		"real-lost-allocation-after-restart", "real-lost-job-evaluations-after-restart", "real-lost-job-after-restart",
		"real-lost-exec-old-alloc-after-restart", "real-lost-replacement-allocation", "real-lost-exec-replacement"),
)

func replayScript(t *testing.T, script []realStep) {
	r := newRealReplay(t)
	parent := t
	for _, st := range script {
		if st.action != nil {
			st.action(r)
			continue
		}
		parent.Run(strings.TrimPrefix(st.fixture, "real-"), func(t *testing.T) {
			r.t = t
			defer func() { r.t = parent }()
			if st.replay != nil {
				st.replay(r, loadReal(t, st.fixture))
				return
			}
			r.step(st.fixture)
		})
	}
}

// TestTheSharedNodeExchangesAnswerAsOnTheRealAgent replays the recorder's
// run on worker-1 against the simulator.
func TestTheSharedNodeExchangesAnswerAsOnTheRealAgent(t *testing.T) {
	t.Parallel()
	replayScript(t, sharedNodeScript)
}

// TestALostNodeIsAnsweredAsOnTheRealAgent replays the lost-node run: the
// node down (exec and logs "No path to node", the allocation lost, a
// blocked replacement, the job pending), then back (the old allocation's
// task stopped, a replacement running, no link between the two).
func TestALostNodeIsAnsweredAsOnTheRealAgent(t *testing.T) {
	t.Parallel()
	replayScript(t, lostNodeScript)
}

// TestEveryRealRecordingIsReplayed keeps the scripts and the recorder in
// step: a real-*.json that no script replays is a recording nothing pins.
func TestEveryRealRecordingIsReplayed(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "recordings", "real-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real-*.json recordings (%v)", err)
	}
	replayed := map[string]bool{}
	for _, st := range slices.Concat(sharedNodeScript, lostNodeScript) {
		if st.fixture != "" {
			replayed[st.fixture] = true
		}
	}
	for _, name := range hostUsageFixtures {
		replayed[name] = true
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if !replayed[name] {
			t.Errorf("%s is replayed by no script", name)
		}
		delete(replayed, name)
	}
	for name := range replayed {
		if _, err := os.Stat(filepath.Join("testdata", "recordings", name+".json")); err != nil {
			t.Errorf("a script replays %s, which is not recorded", name)
		}
	}
}
