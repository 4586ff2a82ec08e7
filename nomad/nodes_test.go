package nomad

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
)

func TestNodesReadsEachNodesFullInfo(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("nodes", "node")
	nodes, err := r.client().Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 {
		t.Fatalf("Nodes = %d nodes, want 1", len(nodes))
	}
	n := nodes[0]
	if n.ID != recNodeID || n.Name != "<hostname>" || n.Datacenter != "dc1" || n.Status != "ready" ||
		n.Eligibility != "eligible" || n.Drain || n.HTTPAddr != "127.0.0.1:4646" {
		t.Fatalf("node = %+v", n)
	}
	for k, want := range map[string]string{"cpu.arch": "amd64", "kernel.name": "linux", "unique.hostname": "<hostname>"} {
		if got := n.Attributes[k]; got != want {
			t.Errorf("Attributes[%q] = %q, want %q", k, got, want)
		}
	}
	if _, ok := n.Attributes["unique.name"]; ok {
		t.Errorf("unique.name is a node variable, not an attribute")
	}
	if got := n.Meta["connect.log_level"]; got != "info" {
		t.Errorf("Meta[connect.log_level] = %q", got)
	}
	wantDrivers := map[string]bool{"raw_exec": true, "exec": true, "java": true, "mock_driver": true, "docker": false, "qemu": false}
	for d, want := range wantDrivers {
		if got, ok := n.Drivers[d]; !ok || got != want {
			t.Errorf("Drivers[%q] = %v (present %v), want %v", d, got, ok, want)
		}
	}
}

func TestNodesSkipsANodeThatVanished(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("nodes")
	fx := loadFixture(t, "error-node-unknown")
	r.handle("GET", "/v1/node/"+recNodeID, func(w http.ResponseWriter, _ *http.Request) { fx.write(w) })
	nodes, err := r.client().Nodes(context.Background())
	if err != nil || len(nodes) != 0 {
		t.Fatalf("Nodes = %v, %v; want none and no error", nodes, err)
	}
}

func TestNodeFindsANodeByName(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("nodes", "node")
	c := r.client()
	n, err := c.Node(context.Background(), "<hostname>")
	if err != nil || n.ID != recNodeID || n.Attributes["cpu.arch"] != "amd64" {
		t.Fatalf("Node = %+v, %v", n, err)
	}
	_, err = c.Node(context.Background(), "no-such-node")
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.Op != OpNode {
		t.Fatalf("Node(unknown) = %v, want ErrNotFound", err)
	}
}

func TestNodeUsageComputesPercentages(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	// Synthetic: no /v1/client/stats answer was recorded. The shape is
	// api.HostStats as Nomad serves it.
	r.handle("GET", "/v1/client/stats", func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Get("node_id") != recNodeID {
			http.Error(w, "Unknown node", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"Memory":{"Total":1000,"Available":250,"Used":700,"Free":100},
			"AllocDirStats":{"Device":"/dev/vda","Size":100,"Used":42,"UsedPercent":42.5},
			"DiskStats":[{"Device":"/dev/vda","UsedPercent":70}],"Uptime":10}`))
	})
	c := r.client()
	u, err := c.NodeUsage(context.Background(), recNodeID)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(u.MemoryPercent-75) > 1e-9 || u.DiskPercent != 42.5 {
		t.Fatalf("NodeUsage = %+v, want memory 75%%, disk 42.5%%", u)
	}
	if _, err := c.NodeUsage(context.Background(), unknownID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NodeUsage(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := c.NodeUsage(context.Background(), "../agent/self"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NodeUsage(path) = %v, want ErrNotFound without a request", err)
	}
	if n := len(r.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}
