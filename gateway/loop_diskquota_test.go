package gateway_test

import (
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"sandgate/nomad"
	"sandgate/nomad/nomadsim"
	"sandgate/store"
)

// allocOf returns the allocation of a running sandbox.
func (h *harness) allocOf(id string) string {
	h.t.Helper()
	rec, err := h.st.Get(h.t.Context(), id)
	if err != nil || rec.AllocID == "" || rec.State != store.StateRunning {
		h.t.Fatalf("sandbox %s: %+v, %v", id, rec, err)
	}
	return rec.AllocID
}

// state returns a sandbox's state and end reason.
func (h *harness) state(id string) string {
	h.t.Helper()
	rec, err := h.st.Get(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	if rec.EndReason != "" {
		return string(rec.State) + "/" + rec.EndReason
	}
	return string(rec.State)
}

func TestASandboxPastItsTaskDirQuotaIsEndedAtTheNextMonitorPass(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	quota := int64(h.engine.Settings().Docker.TaskDirs.QuotaMB) << 20
	local := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	alloc := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	small := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	// What `dd` of 100 MiB into /local and /alloc leaves on the client's disk;
	// 1 MiB stays well under the quota.
	must(t, h.sim.WriteTaskFile(h.allocOf(local), "sandbox/local/big", 100<<20))
	must(t, h.sim.WriteTaskFile(h.allocOf(alloc), "alloc/data/big", 100<<20))
	must(t, h.sim.WriteTaskFile(h.allocOf(small), "sandbox/local/small", 1<<20))
	if 100<<20 <= quota || 1<<20 >= quota {
		t.Fatalf("the test assumes a quota between 1 and 100 MiB, data says %d bytes", quota)
	}

	n, err := h.srv.Reclaim(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("Reclaim = %d, %v; want 2", n, err)
	}
	for _, id := range []string{local, alloc} {
		if got := h.state(id); got != "ended/disk_quota" {
			t.Errorf("%s: %s, want ended/disk_quota", id, got)
		}
		if _, err := h.nc.Job(t.Context(), "sandgate-sbx-"+id); err == nil {
			t.Errorf("%s: its job was not purged", id)
		}
	}
	if got := h.state(small); got != "running" {
		t.Fatalf("the sandbox under its quota: %s", got)
	}
	if u, _ := h.st.NodeUsage(t.Context(), "worker-1"); u.Sandboxes != 1 {
		t.Fatalf("budget after the pass: %+v, want only the small sandbox's", u)
	}
	r := h.gw.Do(http.MethodGet, "/v1/sandboxes/"+local, h.operator, nil)
	if m := r.JSON(t); m["end_reason"] != "disk_quota" {
		t.Fatalf("status of the ended sandbox: %s", r.Body)
	}
	r = h.gw.Do(http.MethodGet, "/v1/decisions?limit=500", h.operator, nil)
	found := false
	for _, x := range r.JSON(t)["decisions"].([]any) {
		d := x.(map[string]any)
		if d["entrypoint"] == "reclaim" && d["allow"] == false && d["sandbox_id"] == local {
			ids := d["rule_ids"].([]any)
			found = len(ids) == 1 && ids[0] == "H5"
		}
	}
	if !found {
		t.Fatalf("no reclaim decision with H5 for %s in /v1/decisions: %s", local, r.Body)
	}
	// The next pass walks the one running sandbox and ends nothing.
	if n, err := h.srv.Reclaim(t.Context()); n != 0 || err != nil {
		t.Fatalf("second pass: %d, %v", n, err)
	}
}

func TestATreeShapedAgainstTheWalkCountsAsOverTheQuota(t *testing.T) {
	t.Parallel()
	lim := nomad.DefaultWalkLimits()
	cases := map[string]func(h *harness, alloc string){
		"more directories than the walk lists": func(h *harness, alloc string) {
			for i := range lim.MaxListings {
				must(t, h.sim.PutTaskFile(alloc, fmt.Sprintf("sandbox/local/d%d", i), fs.ModeDir|0o755, 4096))
			}
		},
		"directories nested deeper than the walk goes": func(h *harness, alloc string) {
			must(t, h.sim.WriteTaskFile(alloc, "sandbox/local/"+strings.Repeat("d/", lim.MaxDepth+1)+"f", 1))
		},
		"more entries than the walk counts, each empty": func(h *harness, alloc string) {
			for i := range lim.MaxEntries + 1 {
				must(t, h.sim.WriteTaskFile(alloc, fmt.Sprintf("alloc/tmp/f%d", i), 0))
			}
		},
	}
	for name, shape := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			id := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
			shape(h, h.allocOf(id))
			if n, err := h.srv.Reclaim(t.Context()); n != 1 || err != nil {
				t.Fatalf("Reclaim = %d, %v", n, err)
			}
			if got := h.state(id); got != "ended/disk_quota" {
				t.Fatalf("%s, want ended/disk_quota", got)
			}
		})
	}
}

func TestTheDiskQuotaEndsNothingWhenItCannotJudge(t *testing.T) {
	t.Parallel()
	const quotaRef = "q := cfg.docker.task_dirs.quota_mb"
	const h5 = `violations contains {"rule": "H5", "msg": sprintf("sandbox %v keeps %v bytes in its task directories (/alloc, /local), above the quota of %v MiB", [_sandbox.id, x, _quota_mb])} if {`
	cases := map[string]struct {
		edit  func(path string, data []byte) ([]byte, error)
		fault *nomadsim.Fault
	}{
		"an INPUT deny (no quota the reclaim policy can read)": {edit: func(path string, data []byte) ([]byte, error) {
			if path != "reclaim/reclaim.rego" {
				return data, nil
			}
			if !strings.Contains(string(data), quotaRef) {
				return nil, fmt.Errorf("reclaim.rego no longer reads %q", quotaRef)
			}
			return []byte(strings.Replace(string(data), quotaRef, "q := cfg.docker.task_dirs.quota_mib", 1)), nil
		}},
		"an engine error (a malformed H5 violation)": {edit: func(path string, data []byte) ([]byte, error) {
			if path != "reclaim/reclaim.rego" {
				return data, nil
			}
			if !strings.Contains(string(data), h5) {
				return nil, fmt.Errorf("reclaim.rego no longer holds %q", h5)
			}
			// The H5 violation of task directories above the quota (this
			// sandbox's 100 MiB are) without a message: the engine refuses
			// the decision.
			return []byte(strings.Replace(string(data), h5, `violations contains {"rule": "H5"} if {`, 1)), nil
		}},
		"Nomad dropping the listing": {fault: &nomadsim.Fault{PathPrefix: "/v1/client/fs/ls/", Drop: true}},
		"Nomad unavailable":          {fault: &nomadsim.Fault{PathPrefix: "/v1/client/fs/ls/", Status: http.StatusServiceUnavailable, Body: "overloaded"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := harnessOptions{}
			if c.edit != nil {
				o.policyDir = copyBundle(t, c.edit)
			}
			h := newHarness(t, o)
			id := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
			must(t, h.sim.WriteTaskFile(h.allocOf(id), "sandbox/local/big", 100<<20))
			if c.fault != nil {
				h.sim.InjectFault(*c.fault)
			}
			n, err := h.srv.Reclaim(t.Context())
			if err == nil || n != 0 {
				t.Fatalf("Reclaim = %d, %v; want 0 and an error", n, err)
			}
			if got := h.state(id); got != "running" {
				t.Fatalf("a sandbox was ended without a decision: %s", got)
			}
		})
	}
}

func TestTheDiskQuotaWalksNothingWhileNoSandboxRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	if r := h.gw.Do(http.MethodDelete, "/v1/sandboxes/"+id, h.operator, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", r.Status, r.Body)
	}
	h.sim.ResetRequests()
	if n, err := h.srv.Reclaim(t.Context()); n != 0 || err != nil {
		t.Fatalf("Reclaim = %d, %v", n, err)
	}
	if got := h.sim.Requests(); got != 0 {
		t.Fatalf("a pass with no live sandbox made %d Nomad requests: %v", got, h.sim.RequestLog())
	}
}

func TestAnIdleSandboxCostsOneAllocationReadAndFiveListings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.gw.Create(h.operator, map[string]any{"node": "worker-1"}).ID
	alloc := h.allocOf(id)
	h.sim.ResetRequests()
	u, err := h.nc.TaskDirUsage(t.Context(), alloc, "sandbox", nomad.WalkLimits{})
	if err != nil || !u.Complete || u.Listings != 5 {
		t.Fatalf("usage %+v, %v", u, err)
	}
	if got := h.sim.Requests(); got != 6 {
		t.Fatalf("%d requests: %v", got, h.sim.RequestLog())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
