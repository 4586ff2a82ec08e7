package nomadsim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The recorded agent's node. Configuring a simulator with it lets fixture
// requests be replayed verbatim: same node ID in paths, same node name in
// ${node.unique.name} constraints, same drivers (no docker, raw_exec on).
const (
	recNodeID   = "a8c17bbd-9102-2be0-686b-d75df7c00b86"
	recNodeName = "<hostname>"
)

func recordingCluster(c *Config) {
	c.Nodes = []NodeConfig{{
		Name: recNodeName, ID: recNodeID, Arch: "amd64", ControlPlane: true,
		Drivers: map[string]bool{"docker": false, "raw_exec": true, "exec": true},
	}}
}

// replay sends a fixture's request as recorded to the simulator at url.
func replay(t *testing.T, url string, rec *recording, hdr ...string) response {
	t.Helper()
	var body any
	if len(rec.Request.Body) > 0 && string(rec.Request.Body) != "null" {
		body = rec.Request.Body
	}
	return do(t, rec.Request.Method, url+rec.Request.Path, body, hdr...)
}

func jsonEqual(t *testing.T, got []byte, want json.RawMessage) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return false
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

// TestFreshClusterRequestsMatchRecordings replays every fixture whose
// request needs no prior state and compares status, headers and body.
func TestFreshClusterRequestsMatchRecordings(t *testing.T) {
	t.Parallel()
	type check int
	const (
		shape     check = iota // same keys and value kinds (IDs, indexes, times differ)
		exactRaw               // byte-identical text body
		exactJSON              // equal JSON
	)
	cases := []struct {
		fixture string
		check   check
		hdr     []string
	}{
		{"agent-self", shape, nil},
		{"agent-members", shape, nil},
		{"regions", exactJSON, nil},
		{"status-leader", exactJSON, nil},
		{"status-peers", exactJSON, nil},
		{"nodes", shape, nil},
		{"nodes-resources", shape, nil},
		{"node", shape, nil},
		{"node-allocations-empty", exactJSON, nil},
		{"error-job-unknown", exactRaw, nil},
		{"error-job-unknown-no-gzip", exactRaw, []string{"Accept-Encoding", "identity"}},
		{"error-allocation-unknown", exactRaw, nil},
		{"error-evaluation-unknown", exactRaw, nil},
		{"error-node-unknown", exactRaw, nil},
		{"error-allocation-stats-unknown", exactRaw, nil},
		{"error-logs-unknown-alloc", exactRaw, nil},
		{"error-register-malformed-json", exactRaw, nil},
		{"error-register-no-task-groups", exactRaw, nil},
		{"error-register-task-without-driver", exactRaw, nil},
		{"error-validate-no-task-groups", exactJSON, nil},
		{"docker-job-validate", exactJSON, nil},
		{"error-job-purge-unknown", exactJSON, nil},
		{"node-eligibility-invalid", exactRaw, nil},
		{"docker-job-register", shape, nil},
		{"rawexec-job-register", shape, nil},
		{"register-missing-datacenters", shape, nil},
		{"register-bad-driver-config", shape, nil},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			_, url, _ := newSim(t, recordingCluster)
			rec := loadRecording(t, tc.fixture)
			got := replay(t, url, rec, tc.hdr...)
			got.checkAgainst(t, rec, tc.fixture)
			switch tc.check {
			case exactRaw:
				if want := rec.raw(t); string(got.body) != want {
					t.Errorf("body %q, recorded %q", got.body, want)
				}
			case exactJSON:
				if !jsonEqual(t, got.body, rec.Body) {
					t.Errorf("body %s, recorded %s", got.body, rec.Body)
				}
			case shape:
				assertSameShape(t, tc.fixture, firstObject(t, got.body), rec.object(t))
			}
		})
	}
}

func TestAgentSelfWorksWithTheAPIClientAndHasTheRecordedShape(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t)
	self, err := c.Agent().Self()
	if err != nil {
		t.Fatal(err)
	}
	if self.Member.Name != "control-1.global" || self.Member.Tags["build"] != DefaultVersion {
		t.Errorf("member = %+v", self.Member)
	}
	if v, _ := self.Config["Version"].(map[string]any); v["Version"] != "1.6.5" || v["VersionMetadata"] != "sim" {
		t.Errorf("config Version = %v", self.Config["Version"])
	}
	rec := loadRecording(t, "agent-self")
	got := firstObject(t, do(t, "GET", url+"/v1/agent/self", nil).body)
	want := rec.object(t)
	assertSameShape(t, "member", got["member"].(map[string]any), want["member"].(map[string]any))
	assertSameShape(t, "stats", got["stats"].(map[string]any), want["stats"].(map[string]any))
	// The config is a subset of the agent's (it is a map on the api side).
	for k := range got["config"].(map[string]any) {
		if _, ok := want["config"].(map[string]any)[k]; !ok {
			t.Errorf("config key %q is not in the recording", k)
		}
	}
	members := firstObject(t, do(t, "GET", url+"/v1/agent/members", nil).body)
	recMembers := loadRecording(t, "agent-members").object(t)
	assertSameShape(t, "members[0]", members["Members"].([]any)[0].(map[string]any), recMembers["Members"].([]any)[0].(map[string]any))
	leader, err := c.Status().Leader()
	if err != nil || leader == "" {
		t.Errorf("leader %q, %v", leader, err)
	}
	_ = s
}

func TestNodeInfoHasTheRecordedShapeAndNomadsAttributes(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t)
	id, err := s.NodeID("worker-1")
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := c.Nodes().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"kernel.name": "linux", "cpu.arch": "arm64", "unique.hostname": "worker-1", "os.name": "ubuntu", "driver.docker": "1",
	} {
		if n.Attributes[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, n.Attributes[k], want)
		}
	}
	if d := n.Drivers["docker"]; d == nil || !d.Detected || !d.Healthy {
		t.Errorf("docker driver = %+v", d)
	}
	if n.HTTPAddr != strings.TrimPrefix(url, "http://") {
		t.Errorf("HTTPAddr %q, server %q", n.HTTPAddr, url)
	}
	if n.Status != "ready" || n.SchedulingEligibility != "eligible" || n.Drain || n.NodeResources == nil {
		t.Errorf("node = %+v", n)
	}
	cp, _ := s.NodeID("control-1")
	cn, _, _ := c.Nodes().Info(cp, nil)
	if cn.Meta[ControlPlaneMetaKey] != "true" {
		t.Errorf("control-1 meta = %v", cn.Meta)
	}
	got := do(t, "GET", url+"/v1/node/"+id, nil)
	rec := loadRecording(t, "node")
	got.checkAgainst(t, rec, "node")
	assertSameShape(t, "node", firstObject(t, got.body), rec.object(t))

	list, _, err := c.Nodes().List(nil)
	if err != nil || len(list) != 3 {
		t.Fatalf("nodes: %v %v", list, err)
	}
	prefixed, _, err := c.Nodes().PrefixList(id[:6])
	if err != nil || len(prefixed) != 1 || prefixed[0].ID != id {
		t.Errorf("prefix list: %v %v", prefixed, err)
	}
	if r := do(t, "GET", url+"/v1/node/"+id[:6], nil); r.status != http.StatusNotFound {
		t.Errorf("node by prefix: status %d, want 404 as Nomad", r.status)
	}
}
