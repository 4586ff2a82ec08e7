package nomad

import (
	"context"
	"testing"
)

func TestColocatedMatchesByNameHostnameOrAddress(t *testing.T) {
	t.Parallel()
	srv := ServerMember{Name: "ctl-1.global", Addr: "10.0.0.5", RPCAddr: "10.0.0.6", Region: "global"}
	node := func(name, host, ip string) Node {
		return Node{Name: name, Attributes: map[string]string{"unique.hostname": host, "unique.network.ip-address": ip}}
	}
	cases := []struct {
		name string
		node Node
		want bool
	}{
		{"a worker on another host", node("w1", "w1", "10.0.0.9"), false},
		{"the same node name", node("ctl-1", "x", "10.0.0.9"), true},
		{"the same hostname", node("x", "ctl-1", "10.0.0.9"), true},
		{"the serf address", node("x", "y", "10.0.0.5"), true},
		{"the rpc address", node("x", "y", "10.0.0.6"), true},
		{"a node without attributes", Node{Name: "w1"}, false},
		{"the region suffix is not part of the name", node("ctl-1.global", "z", ""), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := Colocated(c.node, []ServerMember{srv}); got != c.want {
				t.Fatalf("Colocated = %v, want %v", got, c.want)
			}
		})
	}
	if Colocated(node("ctl-1", "", ""), nil) {
		t.Fatal("no servers: nothing is co-located")
	}
}

func TestServersReadsTheAgentsMemberList(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("agent-members")
	servers, err := r.client().Servers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := ServerMember{Name: "<hostname>.global", Addr: "127.0.0.1", RPCAddr: "127.0.0.1", Region: "global", Status: "alive"}
	if len(servers) != 1 || servers[0] != want {
		t.Fatalf("servers = %+v, want [%+v]", servers, want)
	}
	if servers[0].Host() != "<hostname>" {
		t.Fatalf("Host = %q", servers[0].Host())
	}
}
