package nomad

import (
	"context"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// ServerMember is one Nomad server of the cluster, as the agent's member
// list (serf) reports it.
type ServerMember struct {
	// Name is the serf name, "<node name>.<region>".
	Name string
	// Addr is the serf address; RPCAddr the rpc_addr tag (often the same).
	Addr, RPCAddr string
	Region        string
	// Status is "alive", "failed" or "left".
	Status string
}

// Host is the member's node name: Name without its ".<region>" suffix.
func (m ServerMember) Host() string {
	if m.Region != "" {
		return strings.TrimSuffix(m.Name, "."+m.Region)
	}
	return m.Name
}

// Servers lists the cluster's server members (GET /v1/agent/members),
// failed and left ones included: a server that is down is still a
// control-plane host.
func (c *Client) Servers(ctx context.Context) ([]ServerMember, error) {
	return call(ctx, c, OpServers, func(ctx context.Context) ([]ServerMember, error) {
		var out api.ServerMembers
		if _, err := c.api.Raw().Query("/v1/agent/members", &out, query(ctx)); err != nil {
			return nil, err
		}
		members := make([]ServerMember, 0, len(out.Members))
		for _, m := range out.Members {
			if m == nil {
				continue
			}
			members = append(members, ServerMember{
				Name: m.Name, Addr: m.Addr, RPCAddr: m.Tags["rpc_addr"],
				Region: m.Tags["region"], Status: m.Status,
			})
		}
		return members, nil
	})
}

// Colocated reports whether client node n runs on the host of one of the
// servers: the same node name or hostname as the member's, or the same
// address (the node's unique.network.ip-address against the member's serf
// and RPC addresses). This is how sandgate recognises a control-plane node
// by Nomad server co-location (rule P2); meta keys and name lists are
// judged by the policy.
func Colocated(n Node, servers []ServerMember) bool {
	hostname := n.Attributes["unique.hostname"]
	ip := n.Attributes["unique.network.ip-address"]
	for _, m := range servers {
		host := m.Host()
		switch {
		case host != "" && (host == n.Name || host == hostname):
			return true
		case ip != "" && (ip == m.Addr || ip == m.RPCAddr):
			return true
		}
	}
	return false
}
