package nomadsim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// nodeState fetches the recorded agent's node.
func nodeState(t *testing.T, url string) map[string]any {
	t.Helper()
	return firstObject(t, do(t, "GET", url+"/v1/node/"+recNodeID, nil).body)
}

func lastDrainStatus(n map[string]any) any {
	ld, _ := n["LastDrain"].(map[string]any)
	return ld["Status"]
}

// TestDrainAndEligibilityFollowTheRecordedSemantics replays the recorded
// drain story on the recorded node.
func TestDrainAndEligibilityFollowTheRecordedSemantics(t *testing.T) {
	t.Parallel()
	_, url, c := newSim(t, recordingCluster)

	// An idle node drains at once and stays ineligible.
	idleRec := loadRecording(t, "node-drain-start-idle")
	idle := replay(t, url, idleRec)
	idle.checkAgainst(t, idleRec, "drain idle")
	assertSameShape(t, "drain response", firstObject(t, idle.body), idleRec.object(t))
	completeRec := loadRecording(t, "node-after-drain-complete")
	n := nodeState(t, url)
	assertSameShape(t, "node after drain", n, completeRec.object(t))
	if lastDrainStatus(n) != "complete" || n["SchedulingEligibility"] != "ineligible" || n["Drain"] != false || n["DrainStrategy"] != nil {
		t.Errorf("after idle drain: LastDrain %v, eligibility %v, Drain %v, strategy %v",
			lastDrainStatus(n), n["SchedulingEligibility"], n["Drain"], n["DrainStrategy"])
	}
	assertSameShape(t, "LastDrain", n["LastDrain"].(map[string]any), completeRec.object(t)["LastDrain"].(map[string]any))

	for _, name := range []string{"node-eligibility-eligible", "node-eligibility-eligible-final"} {
		eligRec := loadRecording(t, name)
		elig := replay(t, url, eligRec)
		elig.checkAgainst(t, eligRec, name)
		assertSameShape(t, name, firstObject(t, elig.body), eligRec.object(t))
	}
	if n := nodeState(t, url); n["SchedulingEligibility"] != "eligible" {
		t.Errorf("eligibility %v after marking eligible", n["SchedulingEligibility"])
	}

	// With a live allocation the drain keeps going.
	runningAlloc(t, c, rawExecJob("busy", recNodeName))
	startRec := loadRecording(t, "node-drain-start")
	replay(t, url, startRec).checkAgainst(t, startRec, "drain start")
	drainingRec := loadRecording(t, "node-while-draining")
	n = nodeState(t, url)
	assertSameShape(t, "node while draining", n, drainingRec.object(t))
	assertSameShape(t, "DrainStrategy", n["DrainStrategy"].(map[string]any), drainingRec.object(t)["DrainStrategy"].(map[string]any))
	if lastDrainStatus(n) != "draining" || n["Drain"] != true || n["SchedulingEligibility"] != "ineligible" {
		t.Errorf("while draining: %v %v %v", lastDrainStatus(n), n["Drain"], n["SchedulingEligibility"])
	}

	whileRec := loadRecording(t, "node-eligibility-eligible-while-draining")
	while := replay(t, url, whileRec)
	while.checkAgainst(t, whileRec, "eligible while draining")
	if string(while.body) != whileRec.raw(t) {
		t.Errorf("body %q, recorded %q", while.body, whileRec.raw(t))
	}

	cancelRec := loadRecording(t, "node-drain-cancel")
	replay(t, url, cancelRec).checkAgainst(t, cancelRec, "drain cancel")
	n = nodeState(t, url)
	assertSameShape(t, "node after cancel", n, loadRecording(t, "node-after-drain-cancel").object(t))
	if lastDrainStatus(n) != "canceled" || n["SchedulingEligibility"] != "ineligible" {
		t.Errorf("after cancel: %v %v", lastDrainStatus(n), n["SchedulingEligibility"])
	}

	replay(t, url, loadRecording(t, "node-drain-start-2"))
	markRec := loadRecording(t, "node-drain-cancel-mark-eligible")
	mark := replay(t, url, markRec)
	mark.checkAgainst(t, markRec, "cancel mark eligible")
	assertSameShape(t, "cancel mark eligible", firstObject(t, mark.body), markRec.object(t))
	n = nodeState(t, url)
	assertSameShape(t, "node after cancel with MarkEligible", n, loadRecording(t, "node-after-drain-cancel-mark-eligible").object(t))
	if lastDrainStatus(n) != "canceled" || n["SchedulingEligibility"] != "eligible" {
		t.Errorf("after cancel with MarkEligible: %v %v", lastDrainStatus(n), n["SchedulingEligibility"])
	}

	inRec := loadRecording(t, "node-eligibility-ineligible")
	replay(t, url, inRec).checkAgainst(t, inRec, "ineligible")
	listRec := loadRecording(t, "nodes-after-ineligible")
	list := replay(t, url, listRec)
	list.checkAgainst(t, listRec, "nodes")
	stub := firstObject(t, list.body)
	assertSameShape(t, "node stub", stub, listRec.object(t))
	if stub["SchedulingEligibility"] != "ineligible" {
		t.Errorf("listed eligibility %v", stub["SchedulingEligibility"])
	}

	var events []string
	info, _, _ := c.Nodes().Info(recNodeID, nil)
	for _, e := range info.Events {
		events = append(events, e.Message)
	}
	for _, want := range []string{"Node registered", "Node drain strategy set", "Node drain complete", "Node drain disabled", "Node marked as eligible for scheduling"} {
		if !strings.Contains(strings.Join(events, "|"), want) {
			t.Errorf("events %v lack %q", events, want)
		}
	}
}

// rawExecJob is the recorded raw_exec job shape, pinned to a node.
func rawExecJob(id, node string) *api.Job {
	job := api.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	job.Constrain(api.NewConstraint("${node.unique.name}", "=", node))
	task := api.NewTask("main", "raw_exec").SetConfig("command", "sh").
		SetConfig("args", []string{"-c", "echo hello-out; echo hello-err >&2; exec sleep 300"}).
		Require(&api.Resources{CPU: new(100), MemoryMB: new(64)})
	job.AddTaskGroup(api.NewTaskGroup("g", 1).AddTask(task))
	return job
}

func TestDrainDeadlineStopsRemainingAllocations(t *testing.T) {
	t.Parallel()
	_, _, c := newSim(t)
	alloc := runningAlloc(t, c, sandboxJob("drained", "worker-1"))
	_, err := c.Nodes().UpdateDrainOpts(alloc.NodeID, &api.DrainOptions{DrainSpec: &api.DrainSpec{Deadline: 50_000_000}}, nil)
	must(t, err)
	waitFor(t, "drain to complete", func() bool {
		n, _, _ := c.Nodes().Info(alloc.NodeID, nil)
		return n.LastDrain != nil && n.LastDrain.Status == api.DrainStatusComplete
	})
	a, _, _ := c.Allocations().Info(alloc.ID, nil)
	if a.DesiredStatus != "stop" || a.DesiredDescription != "alloc is being migrated" {
		t.Errorf("alloc after forced drain: %s %q", a.DesiredStatus, a.DesiredDescription)
	}
}

func TestUnknownNodeWritesAndStats(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t)
	r := do(t, "PUT", url+"/v1/node/nope/drain", `{"NodeID":"nope","DrainSpec":{"Deadline":1}}`)
	if r.status != http.StatusInternalServerError || string(r.body) != "node not found" {
		t.Errorf("drain unknown node: %d %q", r.status, r.body)
	}
	r = do(t, "PUT", url+"/v1/node/nope/eligibility", `{"NodeID":"nope","Eligibility":"eligible"}`)
	if r.status != http.StatusInternalServerError || string(r.body) != "node not found" {
		t.Errorf("eligibility unknown node: %d %q", r.status, r.body)
	}
	if r := do(t, "PUT", url+"/v1/node/nope/drain", `{`); r.status != http.StatusBadRequest {
		t.Errorf("malformed drain: %d", r.status)
	}
	if _, err := c.Nodes().Stats("nope", nil); err == nil || !strings.Contains(err.Error(), "Unknown node") {
		t.Errorf("stats of unknown node: %v", err)
	}
	if err := s.SetNodeUsage("worker-1", 150, 0); err == nil {
		t.Error("usage above 100% accepted")
	}
	if err := s.SetNodeEligibility("worker-1", "maybe"); err == nil || err.Error() != `invalid scheduling eligibility "maybe"` {
		t.Errorf("invalid eligibility: %v", err)
	}
}

func TestClientStatsFollowSetNodeUsage(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	must(t, s.SetNodeUsage("worker-2", 75, 40))
	id, _ := s.NodeID("worker-2")
	st, err := c.Nodes().Stats(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := st.Memory
	if m.Total != DefaultMemoryMB<<20 || m.Used != m.Total*3/4 || m.Available != m.Total-m.Used || m.Free != m.Available {
		t.Errorf("memory %+v", m)
	}
	if len(st.DiskStats) != 1 || st.DiskStats[0].UsedPercent != 40 {
		t.Errorf("disk %+v", st.DiskStats)
	}
	must(t, s.SetNodeStatus("worker-2", "down"))
	if _, err := c.Nodes().Stats(id, nil); err == nil {
		t.Error("stats of a down node succeeded")
	}
}

// Usage moves with the sandboxes, as on a real agent: a running container
// holds some memory, files in its tmpfs areas lower the memory available
// (not Used: shared memory, as gopsutil counts it), files written to its
// task directories hold disk, and all of it is given back when the
// allocation stops. TestHostUsageMovesAsOnTheRealAgent compares the moves
// with a real agent's.
func TestClientStatsMoveWithWhatTheNodesSandboxesHold(t *testing.T) {
	t.Parallel()
	s, _, c := newSim(t)
	must(t, s.SetNodeUsage("worker-2", 50, 10))
	id, _ := s.NodeID("worker-2")
	stats := func() (used, held, disk uint64) {
		t.Helper()
		st, err := c.Nodes().Stats(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st.Memory.Used, st.Memory.Total - st.Memory.Available, st.DiskStats[0].Used
	}
	used0, mem0, disk0 := stats()

	job := sandboxJob("sandgate-sbx-usage1", "worker-2")
	alloc := runningAlloc(t, c, job)
	if used, mem, disk := stats(); used != used0+containerResidentBytes || mem != mem0+containerResidentBytes || disk != disk0 {
		t.Errorf("a running container: used %d, held %d (want both %d), disk %d (want %d)",
			used, mem, mem0+containerResidentBytes, disk, disk0)
	}

	s.mu.Lock()
	cfs := s.allocs[alloc.ID].containerFS(time.Now)
	s.mu.Unlock()
	cfs.mu.Lock()
	cfs.nodes["/workspace/big"] = &fsNode{data: make([]byte, 8<<20), mode: 0o644}
	cfs.nodes["/tmp/small"] = &fsNode{data: make([]byte, 1<<20), mode: 0o644}
	cfs.nodes["/etc/layer"] = &fsNode{data: make([]byte, 2<<20), mode: 0o644}
	cfs.mu.Unlock()
	must(t, s.WriteTaskFile(alloc.ID, "sandbox/local/big", 16<<20))
	used, mem, disk := stats()
	if want := mem0 + containerResidentBytes + 9<<20; mem != want {
		t.Errorf("after 9 MiB in /workspace and /tmp: memory held %d, want %d", mem, want)
	}
	if want := used0 + containerResidentBytes; used != want {
		t.Errorf("after 9 MiB in /workspace and /tmp: Used %d, want %d (tmpfs is not in Used)", used, want)
	}
	if want := disk0 + 18<<20; disk != want {
		t.Errorf("after 2 MiB in the writable layer and 16 MiB in /local: disk used %d, want %d", disk, want)
	}

	if _, _, err := c.Jobs().Deregister(*job.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stopped allocation's usage given back", func() bool {
		used, mem, disk := stats()
		return used == used0 && mem == mem0 && disk == disk0
	})
}
