package nomadsim

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// hostUsageFixtures are the recorder's readings of a node's
// /v1/client/stats around what a running sandbox writes (test/e2e's
// hostUsage): running, after a file in its /workspace tmpfs, after a file
// in its task's /local directory, after both are removed.
var hostUsageFixtures = []string{
	"real-client-stats-running", "real-client-stats-after-workspace-write",
	"real-client-stats-after-local-write", "real-client-stats-after-remove",
}

// usageFigure is one figure of a node's host stats that moves, or must
// not, with what a sandbox holds. Memory.Free is not one: on a real host
// the page cache moves it with every file written to disk, which the
// simulator does not model, and the gateway never reads it.
type usageFigure struct {
	name string
	of   func(*api.HostStats) float64
}

var usageFigures = []usageFigure{
	{"Memory.Used", func(s *api.HostStats) float64 { return float64(s.Memory.Used) }},
	// What the gateway reads as used memory (nomad.usageFrom).
	{"Memory.Total-Available", func(s *api.HostStats) float64 { return float64(s.Memory.Total) - float64(s.Memory.Available) }},
	{"AllocDirStats.Used", func(s *api.HostStats) float64 { return float64(s.AllocDirStats.Used) }},
	// What the gateway reads as disk usage, in bytes: gopsutil's percent
	// is of Used+Available (blocks reserved for root are in neither).
	{"AllocDirStats.UsedPercent", func(s *api.HostStats) float64 {
		return s.AllocDirStats.UsedPercent / 100 * float64(s.AllocDirStats.Used+s.AllocDirStats.Available)
	}},
}

// TestHostUsageMovesAsOnTheRealAgent does on the simulator what the
// recorder did on a real agent (a sandbox running, a file in /workspace,
// one in /local, both removed) and compares how each figure the gateway
// reads moved at each step. The simulator moves by exactly what was
// written; the real host moves by that give or take what else it did in
// the second between readings, so each real move must lie within half a
// step's size of the simulator's: a figure that moves on one and stays on
// the other fails.
func TestHostUsageMovesAsOnTheRealAgent(t *testing.T) {
	t.Parallel()
	var real []*api.HostStats
	var notes struct {
		WorkspaceBytes int `json:"workspace_bytes"`
		LocalBytes     int `json:"local_bytes"`
	}
	for _, name := range hostUsageFixtures {
		rec := loadReal(t, name)
		var st api.HostStats
		if err := json.Unmarshal(rec.Body, &st); err != nil || st.Memory == nil || st.AllocDirStats == nil {
			t.Fatalf("%s: no memory or alloc dir stats (%v)", name, err)
		}
		real = append(real, &st)
		b, err := os.ReadFile(filepath.Join("testdata", "recordings", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Notes json.RawMessage `json:"notes"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(f.Notes, &notes); err != nil {
			t.Fatalf("%s notes: %v", name, err)
		}
	}
	if notes.WorkspaceBytes <= 0 || notes.LocalBytes <= 0 {
		t.Fatalf("the recordings do not say what was written: %+v", notes)
	}

	s, url, c := newSim(t, realCluster)
	nodeID, err := s.NodeID("worker-1")
	if err != nil {
		t.Fatal(err)
	}
	job := sandboxJob("sandgate-sbx-realbusybox1", "worker-1")
	job.Constraints[1].RTarget = "amd64" // the recorded pair's architecture
	alloc := runningAlloc(t, c, job)
	var sim []*api.HostStats
	read := func() {
		t.Helper()
		st, err := c.Nodes().Stats(nodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		sim = append(sim, st)
	}
	s.mu.Lock()
	cfs := s.allocs[alloc.ID].containerFS(time.Now)
	s.mu.Unlock()
	setWorkspaceFile := func(size int) {
		cfs.mu.Lock()
		defer cfs.mu.Unlock()
		if size < 0 {
			delete(cfs.nodes, "/workspace/usage-probe")
			return
		}
		cfs.nodes["/workspace/usage-probe"] = &fsNode{data: make([]byte, size), mode: 0o644}
	}
	const local = "sandbox/local/usage-probe"

	read()
	setWorkspaceFile(notes.WorkspaceBytes)
	read()
	must(t, s.WriteTaskFile(alloc.ID, local, int64(notes.LocalBytes)))
	read()
	setWorkspaceFile(-1)
	must(t, s.RemoveTaskFile(alloc.ID, local))
	read()

	steps := []struct {
		what string
		size int // the smaller of what the step wrote or removed
	}{
		{"a file in /workspace", notes.WorkspaceBytes},
		{"a file in /local", notes.LocalBytes},
		{"both removed", min(notes.WorkspaceBytes, notes.LocalBytes)},
	}
	for i, st := range steps {
		for _, f := range usageFigures {
			r := f.of(real[i+1]) - f.of(real[i])
			m := f.of(sim[i+1]) - f.of(sim[i])
			if d := r - m; d > float64(st.size)/2 || -d > float64(st.size)/2 {
				t.Errorf("%s: %s moved by %.0f bytes on the real agent and by %.0f on the simulator", st.what, f.name, r, m)
			}
		}
	}

	// The answer has the members the real agent's has.
	var got, want map[string]json.RawMessage
	resp := do(t, "GET", url+"/v1/client/stats?node_id="+nodeID, nil)
	must(t, json.Unmarshal(resp.body, &got))
	must(t, json.Unmarshal(loadReal(t, hostUsageFixtures[0]).Body, &want))
	if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
		t.Errorf("client stats members: simulator %v, real agent %v", g, w)
	}
}
