package main

import (
	"encoding/json"
	"strings"
	"testing"

	"sandgate/nomad/nomadsim"
)

// With NOMAD_ADDR, render judges the node Nomad reports: its real
// architecture, meta, usage and server co-location.
func TestRenderReadsNodeFactsFromNomadWhenNomadAddrIsSet(t *testing.T) {
	sim, url := nomadsim.NewTestServer(t, nomadsim.DefaultConfig())
	if err := sim.SetNodeUsage("worker-1", 42, 17); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOMAD_ADDR", url)

	code, out, stderr := runCLI(t, "", "render", "--node", "worker-1", "--admission-input")
	if code != exitOK {
		t.Fatalf("render: %d %s", code, stderr)
	}
	if !strings.Contains(stderr, "read from Nomad at "+url) {
		t.Fatalf("stderr does not say where the facts came from: %q", stderr)
	}
	var in struct {
		Node struct {
			ID           string             `json:"id"`
			ControlPlane bool               `json:"control_plane"`
			Attributes   map[string]string  `json:"attributes"`
			Usage        map[string]float64 `json:"usage"`
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	id, _ := sim.NodeID("worker-1")
	if in.Node.ID != id || in.Node.ControlPlane || in.Node.Attributes["unique.network.ip-address"] == "" ||
		in.Node.Usage["memory_percent"] < 41.9 || in.Node.Usage["disk_percent"] < 16.9 {
		t.Fatalf("node facts are not Nomad's: %+v", in.Node)
	}

	// control-1 runs the Nomad server: the admission decision refuses it (P2).
	code, out, _ = runCLI(t, "", "render", "--node", "control-1", "--admission-input")
	if code != exitOK {
		t.Fatalf("render control-1: %d", code)
	}
	code, evalOut, _ := runCLI(t, out, "policy", "eval", "--entrypoint", "admission", "--input", "-")
	if code != exitDenied || !strings.Contains(evalOut, `"P2"`) {
		t.Fatalf("control-1 admission: exit %d %s", code, evalOut)
	}

	if code, _, stderr := runCLI(t, "", "render", "--node", "nope"); code != exitError || !strings.Contains(stderr, "nope") {
		t.Fatalf("an unknown node: %d %q", code, stderr)
	}
}
