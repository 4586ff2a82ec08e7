package nomadsim

import (
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// The agent the simulator impersonates: the first control-plane node, or the
// first node when none is marked. It is both server and client, like
// `nomad agent -dev`.
const (
	simRPCAddr  = "127.0.0.1:4647"
	simRevision = "0000000sim"
)

func (s *Server) agentNodeLocked() *simNode {
	for _, n := range s.nodes {
		if n.controlPlane {
			return n
		}
	}
	return s.nodes[0]
}

// serverMembersLocked lists the control-plane nodes as server members.
func (s *Server) serverMembersLocked() []*api.AgentMember {
	var out []*api.AgentMember
	for i, n := range s.nodes {
		if !n.controlPlane {
			continue
		}
		out = append(out, s.memberLocked(n, i))
	}
	if len(out) == 0 {
		out = append(out, s.memberLocked(s.nodes[0], 0))
	}
	return out
}

func (s *Server) memberLocked(n *simNode, i int) *api.AgentMember {
	return &api.AgentMember{
		Name:   n.n.Name + "." + s.cfg.Region,
		Addr:   n.n.Attributes["unique.network.ip-address"],
		Port:   uint16(4648 + 10*i), //nolint:gosec // i is a small node index
		Status: "alive",
		Tags: map[string]string{
			"vsn": "1", "id": n.n.ID, "region": s.cfg.Region, "raft_vsn": "3",
			"rpc_addr": n.n.Attributes["unique.network.ip-address"], "revision": simRevision, "port": "4647",
			"role": "nomad", "dc": n.n.Datacenter, "build": s.cfg.Version,
			"bootstrap": "1", "expect": "1",
		},
		ProtocolMin: 1, ProtocolMax: 5, ProtocolCur: 2,
		DelegateMin: 2, DelegateMax: 5, DelegateCur: 4,
	}
}

// handleAgentSelf serves GET /v1/agent/self with the keys agent-self.json
// has at the top and the config fields clients read.
func (s *Server) handleAgentSelf(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := s.agentNodeLocked()
	member := s.serverMembersLocked()[0]
	httpAddr := s.addr
	if httpAddr == "" {
		httpAddr = "127.0.0.1:4646"
	}
	host, port, _ := net.SplitHostPort(httpAddr)
	httpPort, _ := strconv.Atoi(port)
	version, meta, _ := strings.Cut(s.cfg.Version, "+")
	config := map[string]any{
		"Region":     s.cfg.Region,
		"Datacenter": n.n.Datacenter,
		"NodeName":   n.n.Name,
		"DataDir":    "/var/lib/nomad",
		"BindAddr":   host,
		"DevMode":    false,
		"LogLevel":   "INFO",
		"Version": map[string]any{
			"BuildDate": nil, "Revision": simRevision, "Version": version,
			"VersionMetadata": meta, "VersionPrerelease": "",
		},
		"Addresses":      map[string]any{"HTTP": host, "RPC": "127.0.0.1", "Serf": "127.0.0.1"},
		"AdvertiseAddrs": map[string]any{"HTTP": httpAddr, "RPC": simRPCAddr, "Serf": "127.0.0.1:4648"},
		"Ports":          map[string]any{"HTTP": httpPort, "RPC": 4647, "Serf": 4648},
		"Server":         map[string]any{"Enabled": true, "BootstrapExpect": 1, "AuthoritativeRegion": ""},
		"Client": map[string]any{
			"Enabled": true, "NodeClass": "", "NodePool": "default",
			"Meta": n.n.Meta, "DisableRemoteExec": false,
		},
		"ACL":       map[string]any{"Enabled": false},
		"TLSConfig": map[string]any{"EnableHTTP": false, "EnableRPC": false},
		"UI":        map[string]any{"Enabled": false},
	}
	stats := map[string]map[string]string{
		"client": {
			"node_id": n.n.ID, "known_servers": simRPCAddr, "heartbeat_ttl": "10s",
			"last_heartbeat": "1s", "num_allocations": strconv.Itoa(s.liveAllocCountLocked()),
		},
		"nomad": {
			"server": "true", "leader": "true", "leader_addr": simRPCAddr,
			"bootstrap": "true", "known_regions": "1",
		},
		"raft": {"state": "Leader", "num_peers": "0", "applied_index": strconv.FormatUint(s.index, 10)},
		"runtime": {
			"kernel.name": runtime.GOOS, "arch": runtime.GOARCH, "version": runtime.Version(),
			"max_procs": "1", "goroutines": "1", "cpu_count": "1",
		},
		"serf":  {"members": strconv.Itoa(len(s.serverMembersLocked())), "failed": "0", "left": "0"},
		"vault": {"tracked_for_revoked": "0", "token_ttl": "0s"},
	}
	body := toWire(api.AgentSelf{Config: config, Member: *member, Stats: stats}) // Meta is node state
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, metaNone, 0, body)
}

// handleAgentMembers serves GET /v1/agent/members: the server members.
func (s *Server) handleAgentMembers(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	members := s.serverMembersLocked()
	n := s.agentNodeLocked()
	out := api.ServerMembers{
		ServerName: n.n.Name, ServerRegion: s.cfg.Region, ServerDC: n.n.Datacenter,
		Members: members,
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, metaNone, 0, toWire(out))
}

// handleStatusLeader serves GET /v1/status/leader: the leader's RPC address.
func (s *Server) handleStatusLeader(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metaNone, 0, simRPCAddr)
}

// handleStatusPeers serves GET /v1/status/peers.
func (s *Server) handleStatusPeers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metaNone, 0, []string{simRPCAddr})
}

// handleRegions serves GET /v1/regions.
func (s *Server) handleRegions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metaNone, 0, []string{s.cfg.Region})
}
