package isolation

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Plan is everything the rendered script manages, in the shape the
// isolation policy (data.sandgate.isolation.decision, input.plan) decides
// on. The script is rendered from the Plan alone, so what the policy allowed
// is what the script does. Every field is always present in its JSON form.
type Plan struct {
	Version    string   `json:"version"`     // stamped on the network label sandgate.isolation
	CommentTag string   `json:"comment_tag"` // every rule's comment starts with it
	Modes      []string `json:"modes"`       // the script's modes: verify, apply, remove
	Network    Network  `json:"network"`
	Chain      string   `json:"chain"`       // the filter chain the script owns
	Overlays   []string `json:"overlays"`    // overlay ranges, canonical CIDRs
	NomadPorts []int    `json:"nomad_ports"` // HTTP, RPC, Serf, ...
	SSHPorts   []int    `json:"ssh_ports"`
	// Rules are every iptables rule the script adds, in the order it adds
	// them.
	Rules []Rule `json:"rules"`
	// Apply lists what --apply ensures, in order; each step is guarded so
	// that running it again changes nothing.
	Apply []Step `json:"apply"`
	// Remove lists what --remove deletes, in order: the same objects.
	Remove       []Step       `json:"remove"`
	ControlPlane ControlPlane `json:"control_plane"`
}

// Network is the Docker bridge network for egress sandboxes.
type Network struct {
	Name           string            `json:"name"`   // Docker network name = rendered jobs' network_mode
	Driver         string            `json:"driver"` // always bridge
	Bridge         string            `json:"bridge"` // Linux bridge interface name
	Subnet         string            `json:"subnet"`
	Gateway        string            `json:"gateway"`
	InterContainer bool              `json:"inter_container"` // com.docker.network.bridge.enable_icc
	IPv6           bool              `json:"ipv6"`
	Resolvers      []string          `json:"resolvers"` // the sandboxes' DNS resolvers (label sandgate.resolvers)
	Labels         map[string]string `json:"labels"`
}

// Rule is one iptables rule in the filter table. Empty match fields match
// anything; DestinationPort 0 means no port match.
type Rule struct {
	ID              string `json:"id"`       // stable name, e.g. drop-net-10.0.0.0/8
	Table           string `json:"table"`    // always filter
	Chain           string `json:"chain"`    // the owned chain, DOCKER-USER or INPUT
	Position        string `json:"position"` // "append", or "first" (inserted at the top)
	InInterface     string `json:"in_interface"`
	Destination     string `json:"destination"`
	Protocol        string `json:"protocol"` // tcp, udp or empty
	DestinationPort int    `json:"dport"`
	Target          string `json:"target"`  // DROP, or the owned chain for a jump
	Comment         string `json:"comment"` // CommentTag, a space, what the rule is for
}

// Args returns the rule's iptables match and target arguments, in the
// order iptables-save prints them.
func (r Rule) Args() []string {
	var a []string
	if r.Destination != "" {
		a = append(a, "-d", r.Destination)
	}
	if r.InInterface != "" {
		a = append(a, "-i", r.InInterface)
	}
	if r.Protocol != "" {
		a = append(a, "-p", r.Protocol)
		if r.DestinationPort != 0 {
			a = append(a, "-m", r.Protocol, "--dport", strconv.Itoa(r.DestinationPort))
		}
	}
	return append(a, "-m", "comment", "--comment", r.Comment, "-j", r.Target)
}

// Step is one object --apply ensures or --remove deletes.
type Step struct {
	Action string `json:"action"` // ensure (apply) or delete (remove)
	Kind   string `json:"kind"`   // chain, rule or network
	Name   string `json:"name"`   // the chain's name, the rule's ID or the network's name
	// Guard is the check that makes the step idempotent: the step acts only
	// when the check says the object is missing (ensure) or present (delete).
	Guard string `json:"guard"`
}

// ControlPlane says how the script recognises a control plane, on which it
// refuses to apply.
type ControlPlane struct {
	RefuseWhen     string              `json:"refuse_when"`  // "any": one indicator present refuses
	RefuseModes    []string            `json:"refuse_modes"` // modes that refuse: apply, verify
	Indicators     []Indicator         `json:"indicators"`
	NomadConfigDir string              `json:"nomad_config_dir"`
	NodeNames      []string            `json:"node_names"`
	NodeMeta       map[string][]string `json:"node_meta"`
	ServerPorts    []int               `json:"server_ports"` // RPC and Serf: listened on by servers only
}

// Indicator is one control-plane check of the script.
type Indicator struct {
	ID          string `json:"id"`
	Description string `json:"description"`
}

// Guards of the steps.
const (
	guardChain   = "iptables -n -L"
	guardRule    = "iptables -C"
	guardNetwork = "docker network inspect"
)

// indicators are the control-plane checks the script carries.
var indicators = []Indicator{
	{"nomad_server_config", "a server block with enabled = true in the Nomad configuration (the config dir and every -config of a running agent)"},
	{"nomad_server_process", "a running nomad agent started with -server or -dev"},
	{"nomad_rpc_listener", "a socket listening on Nomad's RPC or Serf port, which only servers open"},
	{"node_name_list", "this host's name (uname -n, its short form, or the Nomad name setting) is a listed control-plane name"},
	{"node_meta", "the Nomad configuration or a running agent's -meta sets a control-plane node meta value"},
}

// New validates cfg and builds its Plan. A *FlagError (wrapping
// ErrInvalidConfig) names each invalid value.
func New(cfg Config) (*Plan, error) {
	k, err := cfg.check()
	if err != nil {
		return nil, err
	}
	gw := k.subnet.Addr().Next()
	p := &Plan{
		Version:    cfg.Version,
		CommentTag: cfg.CommentTag,
		Modes:      []string{"verify", "apply", "remove"},
		Network: Network{
			Name: cfg.Bridge, Driver: "bridge", Bridge: cfg.Bridge,
			Subnet: k.subnet.String(), Gateway: gw.String(),
			Resolvers: addrStrings(k.resolvers),
		},
		Chain:      cfg.Chain,
		Overlays:   prefixStrings(k.overlays),
		NomadPorts: slices.Clone(cfg.NomadPorts),
		SSHPorts:   slices.Clone(cfg.SSHPorts),
		ControlPlane: ControlPlane{
			RefuseWhen:     "any",
			RefuseModes:    []string{"apply", "verify"},
			Indicators:     slices.Clone(indicators),
			NomadConfigDir: cfg.NomadConfigDir,
			NodeNames:      append([]string{}, cfg.ControlPlaneNames...),
			NodeMeta:       map[string][]string{},
			ServerPorts:    slices.Clone(cfg.NomadPorts[1:3]),
		},
	}
	for _, key := range slices.Sorted(maps.Keys(cfg.ControlPlaneMeta)) {
		p.ControlPlane.NodeMeta[key] = slices.Clone(cfg.ControlPlaneMeta[key])
	}
	p.Network.Labels = map[string]string{
		"sandgate.isolation": p.Version,
		"sandgate.resolvers": strings.Join(p.Network.Resolvers, ","),
	}
	p.Rules = p.rules(k)
	p.Apply, p.Remove = p.steps()
	return p, nil
}

// rules lists the owned chain's drops, then the DOCKER-USER jump and the
// INPUT rule that hook it in.
func (p *Plan) rules(k checked) []Rule {
	var rs []Rule
	drop := func(id, dst, proto string, port int, what string) {
		rs = append(rs, Rule{ID: id, Table: "filter", Chain: p.Chain, Position: "append",
			Destination: dst, Protocol: proto, DestinationPort: port, Target: "DROP",
			Comment: p.CommentTag + " " + what})
	}
	for _, d := range k.drops {
		drop("drop-net-"+d.String(), d.String(), "", 0, dropReason(d.String())+" "+d.String())
	}
	for _, o := range k.overlays {
		drop("drop-overlay-"+o.String(), o.String(), "", 0, "overlay "+o.String())
	}
	for _, port := range p.NomadPorts {
		for _, proto := range []string{"tcp", "udp"} {
			n := strconv.Itoa(port)
			drop("drop-nomad-"+proto+"-"+n, "", proto, port, "nomad "+proto+"/"+n)
		}
	}
	for _, port := range p.SSHPorts {
		n := strconv.Itoa(port)
		drop("drop-ssh-tcp-"+n, "", "tcp", port, "ssh tcp/"+n)
	}
	rs = append(rs,
		Rule{ID: "jump-docker-user", Table: "filter", Chain: "DOCKER-USER", Position: "first",
			InInterface: p.Network.Bridge, Target: p.Chain,
			Comment: p.CommentTag + " jump from " + p.Network.Bridge},
		Rule{ID: "drop-input-bridge", Table: "filter", Chain: "INPUT", Position: "first",
			InInterface: p.Network.Bridge, Target: "DROP",
			Comment: p.CommentTag + " keep " + p.Network.Bridge + " off the host"},
	)
	return rs
}

// steps builds --apply's order (chain, its rules, the hooks, then the
// network, so no container is ever on the network without the rules) and
// --remove's, its exact reverse.
func (p *Plan) steps() (apply, remove []Step) {
	apply = append(apply, Step{Action: "ensure", Kind: "chain", Name: p.Chain, Guard: guardChain})
	for _, r := range p.Rules {
		apply = append(apply, Step{Action: "ensure", Kind: "rule", Name: r.ID, Guard: guardRule})
	}
	apply = append(apply, Step{Action: "ensure", Kind: "network", Name: p.Network.Name, Guard: guardNetwork})
	for i := len(apply) - 1; i >= 0; i-- {
		s := apply[i]
		s.Action = "delete"
		remove = append(remove, s)
	}
	return apply, remove
}

// Rule returns the rule with the given ID.
func (p *Plan) Rule(id string) (Rule, bool) {
	for _, r := range p.Rules {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

func addrStrings(v []netip.Addr) []string {
	out := make([]string, len(v))
	for i, a := range v {
		out[i] = a.String()
	}
	return out
}

func prefixStrings(v []netip.Prefix) []string {
	out := make([]string, len(v))
	for i, p := range v {
		out[i] = p.String()
	}
	return out
}
