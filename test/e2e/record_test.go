package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/render/execwrap"
)

// recordFlag turns TestRecordRealAgent on:
//
//	go test -count=1 ./test/e2e/ -run TestRecordRealAgent -record
var recordFlag = flag.Bool("record", false, "record the real agent's answers into nomad/nomadsim/testdata/recordings/real-*.json")

// recordOnly, with -record, writes only the fixtures whose names match it:
// a new exchange is added without re-recording (and so rewriting the IDs
// and times of) every other fixture.
var recordOnly = flag.String("record-only", "", "with -record: write only the fixtures whose names match this regular expression")

// The fixed names of the recording run: stable job IDs, the gateway's task
// and the unknown allocation of the shared recordings.
const (
	recTask         = "sandbox"
	recUnknownAlloc = "00000000-1111-2222-3333-444444444444"
	recLostNode     = "rec-lost"
	recBound        = 20 * time.Second // one exchange
	recRunBound     = 5 * time.Minute  // the whole run
	recJobPrefix    = "sandgate-sbx-"
)

// recExec is one exec of the script, sent through the gateway's wrapper.
type recExec struct {
	name    string
	argv    []string
	stdin   string
	timeout time.Duration
	workdir string
}

// recExecs are the execs recorded on each image.
var recExecs = []recExec{
	{name: "echo-hi", argv: []string{"echo", "hi"}},
	{name: "exit3", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
	{name: "not-found", argv: []string{"no-such-command-xyz"}},
	{name: "cat-stdin", argv: []string{"cat"}, stdin: "line one\nline two\n"},
	// The wrapper's timeout: TERM to the command's process group, the
	// background child included, then exit 143.
	{name: "timeout", argv: []string{"sh", "-c", "yes > /dev/null & sleep 37"}, timeout: 2 * time.Second},
	// A working directory that does not exist: the wrapper's cd fails, it
	// exits 125 (execwrap.ExitSetupFailed) with the shell's own message.
	{name: "missing-workdir", argv: []string{"pwd"}, workdir: "/workspace/no-such-dir"},
}

// TestRecordRealAgent drives the real agent pair through the exchanges the
// gateway depends on and writes each as a fixture,
// nomad/nomadsim/testdata/recordings/real-*.json, that the simulator's
// tests replay (nomad/nomadsim/real_recordings_test.go). Without -record it
// writes nothing and skips.
func TestRecordRealAgent(t *testing.T) {
	if !*recordFlag {
		t.Skip("pass -record to re-record nomad/nomadsim/testdata/recordings/real-*.json from the real agent")
	}
	need(t)
	rec := newRecorder(t)
	var jobs []string
	t.Cleanup(func() {
		for _, id := range jobs {
			_, _, _ = suite.api.Jobs().Deregister(id, true, nil)
		}
	})
	registered := func(id string) { jobs = append(jobs, id) }

	busybox := rec.sandboxJob(recJobPrefix+"realbusybox1", sharedNode, imageBusybox)
	debian := rec.sandboxJob(recJobPrefix+"realdebian1", sharedNode, imageDebian)

	// A rendered sandbox job, as the gateway registers it, until it runs.
	registered(busybox.id)
	rec.call("real-docker-job-register", http.MethodPut, "/v1/jobs", busybox.body, recBound, busybox.notes(""))
	bbAlloc := rec.waitAlloc(busybox.id, "running", 90*time.Second)
	rec.call("real-docker-job-allocations-running", http.MethodGet, "/v1/job/"+busybox.id+"/allocations", nil, recBound, busybox.notes(bbAlloc))
	rec.call("real-docker-allocation-running", http.MethodGet, "/v1/allocation/"+bbAlloc, nil, recBound, busybox.notes(bbAlloc))
	rec.call("real-docker-job-running", http.MethodGet, "/v1/job/"+busybox.id, nil, recBound, busybox.notes(""))

	registered(debian.id)
	rec.call("real-debian-job-register", http.MethodPut, "/v1/jobs", debian.body, recBound, debian.notes(""))
	dbAlloc := rec.waitAlloc(debian.id, "running", 90*time.Second)
	rec.call("real-debian-allocation-running", http.MethodGet, "/v1/allocation/"+dbAlloc, nil, recBound, debian.notes(dbAlloc))

	// The task's logs: empty (it runs sleep), then with lines the task
	// wrote into its own log files through /alloc.
	rec.logs("real-logs-empty-framed", bbAlloc, gatewayLogParams("stdout", 4096), recBound, busybox.notes(bbAlloc))
	rec.logs("real-logs-empty-plain", bbAlloc, logParams("stdout", "start", 0, true), recBound, busybox.notes(bbAlloc))

	// Execs through the exec wrapper on both images.
	for _, img := range []struct {
		name  string
		job   recJob
		alloc string
	}{{"busybox", busybox, bbAlloc}, {"debian", debian, dbAlloc}} {
		for _, e := range recExecs {
			name := "real-exec-" + img.name + "-" + e.name
			out := rec.exec(name, img.alloc, recTask, wrapped(e), e.stdin, recBound, img.job.notes(img.alloc, "wrapped_argv", e.argv, "timeout_s", wrapTimeout(e).Seconds()))
			if out.exitCode == nil {
				t.Errorf("%s: no exit code (close %d %q)", name, out.closeCode, out.closeReason)
			}
		}
		// Nothing of the timed-out command's tree is left.
		left := rec.exec("", img.alloc, recTask, wrapped(recExec{argv: []string{"sh", "-c",
			`for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in yes*|"sleep 37"*) echo "${p#/proc/} $c";; esac; done`}}), "", recBound, nil)
		if strings.TrimSpace(left.stdout) != "" {
			t.Errorf("%s: processes of the timed-out command still run:\n%s", img.name, left.stdout)
		}
	}

	rec.exec("", bbAlloc, recTask, wrapped(recExec{argv: []string{"sh", "-c",
		`printf 'hello-out\nsecond line\n' >> /alloc/logs/sandbox.stdout.0; printf 'hello-err\n' >> /alloc/logs/sandbox.stderr.0`}}), "", recBound, nil)
	rec.logs("real-logs-stdout-framed", bbAlloc, gatewayLogParams("stdout", 4096), recBound, busybox.notes(bbAlloc))
	rec.logs("real-logs-stdout-end-offset5-framed", bbAlloc, gatewayLogParams("stdout", 5), recBound, busybox.notes(bbAlloc))
	rec.logs("real-logs-stdout-start-plain", bbAlloc, logParams("stdout", "start", 0, true), recBound, busybox.notes(bbAlloc))
	rec.logs("real-logs-stderr-framed", bbAlloc, gatewayLogParams("stderr", 4096), recBound, busybox.notes(bbAlloc))

	// The node's host usage around what the sandbox writes.
	rec.hostUsage(busybox, bbAlloc)

	// Unknown allocations.
	rec.exec("real-exec-unknown-alloc", recUnknownAlloc, recTask, wrapped(recExecs[0]), "", recBound, nil)
	rec.logs("real-logs-unknown-alloc", recUnknownAlloc, gatewayLogParams("stdout", 4096), recBound, nil)
	rec.call("real-allocation-unknown", http.MethodGet, "/v1/allocation/"+recUnknownAlloc, nil, recBound, nil)

	// The same job with ulimit as an object: registered, then refused by
	// the docker driver at task start.
	bad := rec.sandboxJob(recJobPrefix+"realulimit1", sharedNode, imageBusybox)
	bad.setConfig(t, "ulimit", map[string]string{"nofile": "1024:1024", "nproc": "512:512"})
	registered(bad.id)
	rec.call("real-ulimit-object-job-register", http.MethodPut, "/v1/jobs", bad.body, recBound, bad.notes(""))
	badAlloc := rec.waitAlloc(bad.id, "failed", 90*time.Second)
	time.Sleep(time.Second) // let the task events settle
	rec.call("real-ulimit-object-job-allocations", http.MethodGet, "/v1/job/"+bad.id+"/allocations", nil, recBound, bad.notes(badAlloc))
	rec.call("real-ulimit-object-allocation", http.MethodGet, "/v1/allocation/"+badAlloc, nil, recBound, bad.notes(badAlloc))
	rec.call("real-ulimit-object-job", http.MethodGet, "/v1/job/"+bad.id, nil, recBound, bad.notes(""))

	// Purge: the job is gone, its allocation stays readable; exec and logs
	// on that allocation.
	rec.call("real-docker-job-purge", http.MethodDelete, "/v1/job/"+busybox.id+"?purge=true", nil, recBound, busybox.notes(bbAlloc))
	rec.call("real-docker-job-after-purge", http.MethodGet, "/v1/job/"+busybox.id, nil, recBound, busybox.notes(""))
	waited := rec.waitAllocStatus(bbAlloc, "complete", 60*time.Second)
	rec.call("real-docker-allocation-after-purge", http.MethodGet, "/v1/allocation/"+bbAlloc, nil, recBound, busybox.notes(bbAlloc, "waited_ms", waited.Milliseconds()))
	rec.exec("real-exec-purged-alloc", bbAlloc, recTask, wrapped(recExecs[0]), "", recBound, busybox.notes(bbAlloc))
	rec.logs("real-logs-purged-alloc", bbAlloc, gatewayLogParams("stdout", 4096), recBound, busybox.notes(bbAlloc))
	_, _, _ = suite.api.Jobs().Deregister(debian.id, true, nil)
	_, _, _ = suite.api.Jobs().Deregister(bad.id, true, nil)

	rec.lostNode(registered)

	if took := time.Since(rec.start); took > recRunBound {
		t.Errorf("the record run took %s, more than %s", took, recRunBound)
	}
	t.Logf("recorded %d fixtures in %s: %s", len(rec.names), time.Since(rec.start).Round(time.Second), strings.Join(rec.names, " "))
}

// lostNode records a sandbox on a client agent that is killed (SIGKILL)
// and restarted: the node once down, its allocation then, exec and logs
// on it while the node is down, and Nomad's reaction once it is back.
func (r *recorder) lostNode(registered func(string)) {
	t := r.t
	a, err := startClient(recLostNode)
	t.Cleanup(func() {
		if a != nil {
			a.Stop()
		}
	})
	if err != nil {
		t.Fatalf("client agent %s: %v", recLostNode, err)
	}
	job := r.sandboxJob(recJobPrefix+"reallost1", recLostNode, imageBusybox)
	registered(job.id)
	r.call("real-lost-job-register", http.MethodPut, "/v1/jobs", job.body, recBound, job.notes(""))
	alloc := r.waitAlloc(job.id, "running", 90*time.Second)
	var info api.Allocation
	r.call("real-lost-allocation-running", http.MethodGet, "/v1/allocation/"+alloc, nil, recBound, job.notes(alloc)).decode(t, &info)
	nodeID := info.NodeID

	// An exec in flight when the agent dies: how does its stream end?
	inFlight := make(chan execOutcome, 1)
	go func() {
		inFlight <- r.exec("real-lost-exec-in-flight", alloc, recTask, wrapped(recExec{argv: []string{"sleep", "60"}}), "", recBound,
			job.notes(alloc, "killed_after_ms", 1000))
	}()
	time.Sleep(time.Second)
	a.Kill()
	killed := time.Now()
	ex := <-inFlight
	t.Logf("the exec in flight ended with exit %v, close %d %q after %s", ex.exitCode, ex.closeCode, ex.closeReason, ex.took)
	down, ok := waitFor(60*time.Second, func() bool {
		n, _, err := suite.api.Nodes().Info(nodeID, nil)
		return err == nil && n.Status == api.NodeStatusDown
	})
	if !ok {
		t.Fatalf("node %s not down within 60 s of SIGKILL", recLostNode)
	}
	r.call("real-lost-node-down", http.MethodGet, "/v1/node/"+nodeID, nil, recBound, job.notes("", "down_after_kill_ms", down.Milliseconds()))
	// The server's reaction to the node going down is an evaluation;
	// give it a moment to mark the allocation.
	lost, _ := waitFor(20*time.Second, func() bool {
		al, _, err := suite.api.Allocations().Info(alloc, nil)
		return err == nil && al.ClientStatus != api.AllocClientStatusRunning
	})
	time.Sleep(time.Second)
	notes := job.notes(alloc, "after_kill_ms", time.Since(killed).Milliseconds(), "status_changed_after_down_ms", lost.Milliseconds())
	r.call("real-lost-allocation-node-down", http.MethodGet, "/v1/allocation/"+alloc, nil, recBound, notes)
	r.call("real-lost-job-allocations-node-down", http.MethodGet, "/v1/job/"+job.id+"/allocations", nil, recBound, job.notes(alloc))
	r.call("real-lost-job-evaluations-node-down", http.MethodGet, "/v1/job/"+job.id+"/evaluations", nil, recBound, job.notes(alloc))
	r.call("real-lost-job-node-down", http.MethodGet, "/v1/job/"+job.id, nil, recBound, job.notes(""))
	ex = r.exec("real-lost-exec-node-down", alloc, recTask, wrapped(recExecs[0]), "", recBound, job.notes(alloc))
	lg := r.logs("real-lost-logs-node-down", alloc, gatewayLogParams("stdout", 4096), recBound, job.notes(alloc))
	t.Logf("node down: exec close %d %q after %s (exit %v); logs %d %q after %s (%v)",
		ex.closeCode, ex.closeReason, ex.took, ex.exitCode, lg.status, lg.body, lg.took, lg.err)

	if err := a.Restart(); err != nil {
		t.Fatalf("restart %s: %v", recLostNode, err)
	}
	restarted := time.Now()
	back, ok := waitFor(90*time.Second, func() bool {
		n, _, err := suite.api.Nodes().Info(nodeID, nil)
		return err == nil && n.Status == api.NodeStatusReady
	})
	if !ok {
		t.Fatalf("node %s not ready within 90 s of its restart", recLostNode)
	}
	// Nomad's reaction: a replacement allocation running, and the old one
	// settled on the client (bounded; no reaction is an observation too).
	var replacement string
	reacted, _ := waitFor(60*time.Second, func() bool {
		stubs, _, err := suite.api.Jobs().Allocations(job.id, true, nil)
		if err != nil {
			return false
		}
		for _, s := range stubs {
			if s.ID != alloc && s.ClientStatus == api.AllocClientStatusRunning {
				replacement = s.ID
			}
		}
		return replacement != ""
	})
	settled := r.waitSettled(alloc, 20*time.Second)
	notes = job.notes(alloc, "ready_after_restart_ms", back.Milliseconds(), "replacement_running_after_ready_ms", reacted.Milliseconds(),
		"old_alloc_settled_ms", settled.Milliseconds(), "after_restart_ms", time.Since(restarted).Milliseconds(), "replacement_alloc_id", replacement)
	r.call("real-lost-node-after-restart", http.MethodGet, "/v1/node/"+nodeID, nil, recBound, job.notes(""))
	r.call("real-lost-job-allocations-after-restart", http.MethodGet, "/v1/job/"+job.id+"/allocations", nil, recBound, notes)
	r.call("real-lost-allocation-after-restart", http.MethodGet, "/v1/allocation/"+alloc, nil, recBound, notes)
	r.call("real-lost-job-evaluations-after-restart", http.MethodGet, "/v1/job/"+job.id+"/evaluations", nil, recBound, job.notes(alloc))
	r.call("real-lost-job-after-restart", http.MethodGet, "/v1/job/"+job.id, nil, recBound, job.notes(""))
	r.exec("real-lost-exec-old-alloc-after-restart", alloc, recTask, wrapped(recExecs[0]), "", recBound, job.notes(alloc))
	if replacement != "" {
		r.call("real-lost-replacement-allocation", http.MethodGet, "/v1/allocation/"+replacement, nil, recBound, job.notes(replacement, "role", "replacement"))
		r.exec("real-lost-exec-replacement", replacement, recTask, wrapped(recExecs[0]), "", recBound, job.notes(replacement, "role", "replacement"))
	}
	t.Logf("after restart: ready in %s, replacement %q running %s later, old alloc settled in %s", back, replacement, reacted, settled)
	_, _, _ = suite.api.Jobs().Deregister(job.id, true, nil)
	a.Stop()
}

// The sizes hostUsage writes: into the /workspace tmpfs (below the
// sandbox's 128 MB memory limit, which a tmpfs's pages count against) and
// into the task's /local directory on the agent's data dir.
const (
	recTmpfsBytes = 48 << 20
	recLocalBytes = 64 << 20
)

// hostUsage records the node's /v1/client/stats around what a running
// sandbox writes: before, after recTmpfsBytes into /workspace (a tmpfs:
// host memory), after recLocalBytes into /local (the data dir's disk),
// and after both are removed. Each reading is taken once the agent's
// collector (every second) has seen the change, waited for on the figure
// the gateway reads (memory Total-Available; AllocDirStats.Used), never
// on a fixed pause. The simulator's usage model is checked against them
// (nomad/nomadsim TestHostUsageMovesAsOnTheRealAgent). Record on a quiet
// machine: other work moves the host's figures too.
func (r *recorder) hostUsage(j recJob, alloc string) {
	t := r.t
	a, _, err := suite.api.Allocations().Info(alloc, nil)
	if err != nil {
		t.Fatalf("allocation %s: %v", alloc, err)
	}
	path := "/v1/client/stats?node_id=" + a.NodeID
	held := func() (memory, disk int64) {
		st, err := suite.api.Nodes().Stats(a.NodeID, nil)
		if err != nil || st.Memory == nil || st.AllocDirStats == nil {
			return -1, -1
		}
		return int64(st.Memory.Total) - int64(st.Memory.Available), int64(st.AllocDirStats.Used) //nolint:gosec // host sizes fit
	}
	run := func(script string) {
		out := r.exec("", alloc, recTask, wrapped(recExec{argv: []string{"sh", "-c", script}}), "", recBound, nil)
		if out.exitCode == nil || *out.exitCode != 0 {
			t.Fatalf("%s: exit %v, stderr %q", script, out.exitCode, out.stderr)
		}
	}
	// settled waits until cond holds of the figures on two readings in a
	// row, so the recorded answer (read next) shows it too.
	settled := func(what string, cond func(memory, disk int64) bool) time.Duration {
		in := 0
		took, ok := waitFor(30*time.Second, func() bool {
			if m, d := held(); m >= 0 && cond(m, d) {
				in++
			} else {
				in = 0
			}
			return in >= 2
		})
		if !ok {
			t.Fatalf("host usage: %s not seen within 30 s", what)
		}
		return took
	}
	mem0, disk0 := held()
	if mem0 < 0 {
		t.Fatalf("client stats of node %s: no memory or alloc dir figures", a.NodeID)
	}
	r.call("real-client-stats-running", http.MethodGet, path, nil, recBound, j.notes(alloc))

	run(fmt.Sprintf("dd if=/dev/zero of=/workspace/usage-probe bs=1048576 count=%d 2>/dev/null", recTmpfsBytes>>20))
	waited := settled("the tmpfs file in memory", func(m, _ int64) bool { return m-mem0 >= recTmpfsBytes/2 })
	r.call("real-client-stats-after-workspace-write", http.MethodGet, path, nil, recBound,
		j.notes(alloc, "workspace_bytes", recTmpfsBytes, "waited_ms", waited.Milliseconds()))

	run(fmt.Sprintf("dd if=/dev/zero of=/local/usage-probe bs=1048576 count=%d 2>/dev/null && sync", recLocalBytes>>20))
	waited = settled("the /local file on disk", func(_, d int64) bool { return d-disk0 >= recLocalBytes/2 })
	r.call("real-client-stats-after-local-write", http.MethodGet, path, nil, recBound,
		j.notes(alloc, "workspace_bytes", recTmpfsBytes, "local_bytes", recLocalBytes, "waited_ms", waited.Milliseconds()))

	run("rm -f /workspace/usage-probe /local/usage-probe && sync")
	waited = settled("both files given back", func(m, d int64) bool {
		return m-mem0 < recTmpfsBytes/4 && d-disk0 < recLocalBytes/4
	})
	r.call("real-client-stats-after-remove", http.MethodGet, path, nil, recBound,
		j.notes(alloc, "waited_ms", waited.Milliseconds()))
}

// recJob is a job the recorder registers: the gateway's rendering.
type recJob struct {
	id, node, image string
	job             api.Job
	body            []byte // the register request, as the gateway sends it
}

// sandboxJob renders the gateway's job for a fixed sandbox id with the
// sandgate binary (`sandgate render`, the e2e policy data).
func (r *recorder) sandboxJob(jobID, node, image string) recJob {
	r.t.Helper()
	cmd := exec.Command(suite.gateway, "render", "--node", node, "--policy-dir", suite.policyDir, //nolint:gosec // G204: the binary the suite built
		"--id", strings.TrimPrefix(jobID, recJobPrefix), "--image", image, "--cpu", "100", "--memory", "128")
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("sandgate render: %v", err)
	}
	j := recJob{id: jobID, node: node, image: image}
	if err := json.Unmarshal(out, &j.job); err != nil {
		r.t.Fatalf("rendered job: %v", err)
	}
	if *j.job.ID != jobID {
		r.t.Fatalf("rendered job id %s, want %s", *j.job.ID, jobID)
	}
	j.encode(r.t)
	return j
}

func (j *recJob) encode(t *testing.T) {
	t.Helper()
	b, err := json.Marshal(&api.JobRegisterRequest{Job: &j.job})
	if err != nil {
		t.Fatal(err)
	}
	j.body = b
}

// setConfig changes one key of the task's driver config.
func (j *recJob) setConfig(t *testing.T, key string, v any) {
	j.job.TaskGroups[0].Tasks[0].Config[key] = v
	j.encode(t)
}

// notes names the job, node and image of a fixture and, when alloc is
// set, the allocation it is about (the simulator's tests map it to their
// own).
func (j recJob) notes(alloc string, kv ...any) map[string]any {
	n := map[string]any{"job_id": j.id, "node": j.node, "image": j.image}
	if alloc != "" {
		n["alloc_id"] = alloc
	}
	return withNote(n, kv...)
}

// wrapped is the argv the gateway sends for e: the exec wrapper with the
// gateway's kill-after.
func wrapped(e recExec) []string {
	return execwrap.Command{Argv: e.argv, Workdir: e.workdir, Timeout: wrapTimeout(e), KillAfter: 5 * time.Second}.Args()
}

func wrapTimeout(e recExec) time.Duration {
	if e.timeout > 0 {
		return e.timeout
	}
	return 30 * time.Second
}

// gatewayLogParams are the parameters of the gateway's Logs call.
func gatewayLogParams(stream string, tail int64) url.Values {
	return logParams(stream, "end", tail, false)
}

func logParams(stream, origin string, offset int64, plain bool) url.Values {
	return url.Values{
		"task": {recTask}, "type": {stream}, "origin": {origin}, "offset": {itoa64(offset)},
		"plain": {boolString(plain)}, "follow": {"false"},
	}
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// waitFor polls cond every 250 ms until it holds or bound passes; it
// returns how long that took and whether cond held.
func waitFor(bound time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > bound {
			return time.Since(start), false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitAlloc waits for the job's first allocation to reach status and
// returns its ID.
func (r *recorder) waitAlloc(jobID, status string, bound time.Duration) string {
	r.t.Helper()
	var id, last string
	if _, ok := waitFor(bound, func() bool {
		stubs, _, err := suite.api.Jobs().Allocations(jobID, true, nil)
		if err != nil || len(stubs) == 0 {
			return false
		}
		id, last = stubs[0].ID, stubs[0].ClientStatus
		return last == status
	}); !ok {
		r.t.Fatalf("job %s: no allocation %s within %s (last %q)", jobID, status, bound, last)
	}
	return id
}

// waitAllocStatus waits for an allocation's ClientStatus.
func (r *recorder) waitAllocStatus(id, status string, bound time.Duration) time.Duration {
	r.t.Helper()
	took, ok := waitFor(bound, func() bool {
		a, _, err := suite.api.Allocations().Info(id, nil)
		return err == nil && a.ClientStatus == status
	})
	if !ok {
		r.t.Fatalf("allocation %s not %s within %s", id, status, bound)
	}
	return took
}

// waitSettled waits until an allocation's client and desired status, task
// states and event counts have not changed for 3 s (at most bound).
func (r *recorder) waitSettled(id string, bound time.Duration) time.Duration {
	var last string
	since := time.Now()
	took, _ := waitFor(bound, func() bool {
		a, _, err := suite.api.Allocations().Info(id, nil)
		if err != nil {
			return false
		}
		cur := a.ClientStatus + "/" + a.DesiredStatus + "/" + a.NextAllocation
		for _, ts := range a.TaskStates {
			cur += fmt.Sprintf("/%s:%d", ts.State, len(ts.Events))
		}
		if cur != last {
			last, since = cur, time.Now()
		}
		return time.Since(since) >= 3*time.Second
	})
	return took
}
