// Package isolation renders the host isolation bundle of an egress worker
// (rules I1-I4): a reviewable bash script with --verify, --apply and --remove
// that creates one Docker bridge network for egress sandboxes and the
// iptables rules that keep that network away from the cluster, private
// address space, cloud metadata, the Nomad and SSH ports and the host itself.
//
// The package is pure: it validates a Config, builds the Plan (every rule
// and step the script manages, which the isolation policy decides on) and
// renders the script from that Plan with an embedded text/template. It runs
// nothing.
package isolation

// Config is what an operator chooses for one egress worker. Build it with
// DefaultConfig and override fields; New validates it. Each field names the
// `sandgate isolation render` flag that sets it, which errors name too.
type Config struct {
	// Bridge is both the Docker network's name and its Linux bridge
	// interface name (--bridge). It must equal the network_mode the rendered
	// egress jobs use, and be a valid interface name: 1 to 15 characters of
	// [a-zA-Z0-9_.-], not starting with '-'.
	Bridge string
	// Subnet is the network's IPv4 subnet in canonical CIDR form (--subnet);
	// its first address is the gateway. Prefix length 16 to 29.
	Subnet string
	// Overlays are the cluster's overlay (e.g. WireGuard) IPv4 ranges
	// (--overlay); the sandbox reaches none of them. They must not overlap
	// each other or Subnet.
	Overlays []string
	// NomadPorts are Nomad's HTTP, RPC and Serf ports, in that order, and
	// any further ports Nomad uses (--nomad-ports). Sandboxes reach none of
	// them on any address (tcp and udp). The RPC and Serf ports (the second
	// and third) only listen on servers: a listener on them marks a control
	// plane.
	NomadPorts []int
	// SSHPorts are the SSH ports sandboxes never reach (--ssh-ports), tcp.
	SSHPorts []int
	// Resolvers are the sandboxes' DNS resolvers (--resolver): public IPv4
	// addresses only, never inside a dropped or special-purpose range.
	Resolvers []string
	// ControlPlaneNames are node names of control-plane hosts
	// (--control-plane-name): the script refuses to run on a host of that
	// name.
	ControlPlaneNames []string
	// ControlPlaneMeta maps a Nomad node meta key to the values that mark a
	// control-plane node (policy data placement.control_plane.meta); the
	// script refuses a host whose Nomad configuration sets one.
	ControlPlaneMeta map[string][]string
	// NomadConfigDir is the Nomad agent's configuration directory
	// (--nomad-config-dir): an absolute path the script scans for a server
	// block and control-plane meta.
	NomadConfigDir string
	// DropCIDRs are the ranges sandboxes never reach besides the overlays:
	// this network, RFC 1918, CGNAT, link-local and cloud metadata, IETF
	// protocol assignments, benchmarking, multicast and reserved space.
	DropCIDRs []string
	// Chain is the iptables filter chain the script owns (1 to 28
	// characters of [A-Za-z0-9_-]; never a built-in or Docker chain).
	Chain string
	// CommentTag starts the comment of every rule the script adds, so that
	// an operator can find them all (`iptables-save | grep TAG`).
	CommentTag string
	// Version is stamped on the Docker network's label sandgate.isolation;
	// the node declares it in its Nomad meta for egress enrollment (I5).
	Version string
}

// Defaults of Config.
const (
	DefaultBridge         = "sandgate-egress"
	DefaultSubnet         = "172.31.250.0/24"
	DefaultNomadConfigDir = "/etc/nomad.d"
	DefaultChain          = "SANDGATE-ISOLATION"
	DefaultCommentTag     = "sandgate-isolation"
	DefaultVersion        = "v1"
)

// dropRanges are the default DropCIDRs and why each is dropped; the reason
// is part of each rule's comment.
var dropRanges = []struct{ cidr, reason string }{
	{"0.0.0.0/8", "this-network"},
	{"10.0.0.0/8", "rfc1918"},
	{"100.64.0.0/10", "cgnat"},
	{"169.254.0.0/16", "link-local-and-metadata"},
	{"172.16.0.0/12", "rfc1918"},
	{"192.0.0.0/24", "ietf-protocol-assignments"},
	{"192.168.0.0/16", "rfc1918"},
	{"198.18.0.0/15", "benchmarking"},
	{"224.0.0.0/4", "multicast"},
	{"240.0.0.0/4", "reserved-and-broadcast"},
}

// DefaultConfig returns the default values (rules I1-I4): network and bridge
// sandgate-egress on 172.31.250.0/24, no overlay, Nomad ports 4646, 4647,
// 4648, SSH port 22, resolvers 1.1.1.1 and 9.9.9.9, no control-plane node
// name, the control-plane meta of the default policy data
// (sandgate.control_plane=true, node-role=server|control-plane), Nomad
// configuration in /etc/nomad.d, every range of dropRanges, chain
// SANDGATE-ISOLATION, comment tag sandgate-isolation, version v1.
func DefaultConfig() Config {
	drops := make([]string, 0, len(dropRanges))
	for _, d := range dropRanges {
		drops = append(drops, d.cidr)
	}
	return Config{
		Bridge:     DefaultBridge,
		Subnet:     DefaultSubnet,
		NomadPorts: []int{4646, 4647, 4648},
		SSHPorts:   []int{22},
		Resolvers:  []string{"1.1.1.1", "9.9.9.9"},
		ControlPlaneMeta: map[string][]string{
			"sandgate.control_plane": {"true"},
			"node-role":              {"server", "control-plane"},
		},
		NomadConfigDir: DefaultNomadConfigDir,
		DropCIDRs:      drops,
		Chain:          DefaultChain,
		CommentTag:     DefaultCommentTag,
		Version:        DefaultVersion,
	}
}

// dropReason names why cidr is dropped, for its rule's comment.
func dropReason(cidr string) string {
	for _, d := range dropRanges {
		if d.cidr == cidr {
			return d.reason
		}
	}
	return "operator-range"
}
