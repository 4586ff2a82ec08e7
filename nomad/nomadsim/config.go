package nomadsim

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"
)

// Default values that New applies to a zero field of Config or NodeConfig.
const (
	DefaultRunDelay     = 100 * time.Millisecond
	DefaultLogHeartbeat = time.Second
	DefaultVersion      = "1.6.5+sim"
	DefaultRegion       = "global"
	DefaultDatacenter   = "dc1"
	DefaultArch         = "arm64"
	DefaultOS           = "linux"
	DefaultMemoryMB     = 16384
	DefaultDiskMB       = 65536
	DefaultCPUMHz       = 8000

	// ControlPlaneMetaKey is the node meta key DefaultConfig sets on the
	// control-plane node.
	ControlPlaneMetaKey = "sandgate.control_plane"
	// IsolationMetaKey is the node meta key by which a node declares the
	// egress isolation bundle (policy data placement.egress_isolation).
	IsolationMetaKey = "sandgate.isolation"
)

// Config describes the simulated cluster. The zero value of every field
// means "use the default"; New never reads the environment.
type Config struct {
	// Nodes are the client nodes of the cluster, in listing order. At least
	// one is required.
	Nodes []NodeConfig
	// RunDelay is how long an allocation stays pending before its tasks are
	// running (default 100ms). Negative means no delay at all.
	RunDelay time.Duration
	// Region is the region every node, job and member reports (default "global").
	Region string
	// Datacenter is the datacenter of nodes that do not set one (default "dc1").
	Datacenter string
	// Version is the agent version reported by agent/self, members and nodes
	// (default "1.6.5+sim").
	Version string
	// LogHeartbeat is the interval of the empty `{}` frames on a followed log
	// stream (default 1s).
	LogHeartbeat time.Duration
	// QuietTasks starts every task's logs empty, as a real sandbox task
	// (docker, running sleep) has them (real-logs-empty-*.json). By default
	// a task's stdout starts with one line saying that the simulator runs
	// nothing, which the demo mode shows.
	QuietTasks bool
}

// NodeConfig describes one simulated client node.
type NodeConfig struct {
	// Name is the node name (Node.Name, ${node.unique.name},
	// attr.unique.hostname). Required and unique.
	Name string
	// ID is the node UUID; generated when empty.
	ID string
	// Datacenter overrides Config.Datacenter for this node.
	Datacenter string
	// Arch is attr.cpu.arch in Go's spelling (default "arm64").
	Arch string
	// OS is attr.kernel.name (default "linux").
	OS string
	// Meta is the node meta (${meta.KEY}).
	Meta map[string]string
	// Status is "ready" (default), "down", "initializing" or "disconnected".
	Status string
	// Eligibility is "eligible" (default) or "ineligible".
	Eligibility string
	// Drivers maps a driver name to its health. Nil means {"docker": true}.
	// A driver mapped to false is listed undetected and unhealthy, as docker
	// is on an agent without a Docker engine (node.json).
	Drivers map[string]bool
	// ControlPlane makes the agent report this node as a server member too.
	ControlPlane bool
	// Address is attr.unique.network.ip-address, and a server member's
	// address when ControlPlane (default 192.0.2.<10+index>, a documentation
	// range: it is data only, the simulator never connects to it).
	Address string
	// MemoryMB, DiskMB and CPUMHz are the node's schedulable resources
	// (defaults 16384, 65536, 8000: the policy bundle's default node budget fits).
	MemoryMB int
	DiskMB   int
	CPUMHz   int
	// ReservedCPUMHz and ReservedMemoryMB are the node's ReservedResources
	// (a client's `reserved` block): the scheduler fits allocations within
	// the resources less these, as Nomad does (default 0, as node.json).
	ReservedCPUMHz   int
	ReservedMemoryMB int
}

// DefaultConfig returns two ready linux/arm64 workers, "worker-1" and
// "worker-2" (whose meta declares the isolation bundle, sandgate.isolation=v1,
// so it can be enrolled for egress), and one control-plane node "control-1"
// whose meta carries sandgate.control_plane=true. Every node has a healthy
// docker driver.
func DefaultConfig() Config {
	return Config{
		Nodes: []NodeConfig{
			{Name: "worker-1"},
			{Name: "worker-2", Meta: map[string]string{IsolationMetaKey: "v1"}},
			{Name: "control-1", ControlPlane: true, Meta: map[string]string{ControlPlaneMetaKey: "true"}},
		},
	}
}

// withDefaults returns a copy of c with defaults applied, or an error that
// says which field is invalid.
func (c Config) withDefaults() (Config, error) {
	if len(c.Nodes) == 0 {
		return c, errors.New("nomadsim: config: at least one node is required")
	}
	if c.RunDelay == 0 {
		c.RunDelay = DefaultRunDelay
	}
	if c.RunDelay < 0 {
		c.RunDelay = 0
	}
	if c.LogHeartbeat <= 0 {
		c.LogHeartbeat = DefaultLogHeartbeat
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.Datacenter == "" {
		c.Datacenter = DefaultDatacenter
	}
	nodes := make([]NodeConfig, len(c.Nodes))
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		if n.Name == "" {
			return c, fmt.Errorf("nomadsim: config: node %d has no name", i)
		}
		if seen[n.Name] {
			return c, fmt.Errorf("nomadsim: config: duplicate node name %q", n.Name)
		}
		seen[n.Name] = true
		if n.ID == "" {
			n.ID = newUUID()
		}
		if seen["id:"+n.ID] {
			return c, fmt.Errorf("nomadsim: config: duplicate node id %q", n.ID)
		}
		seen["id:"+n.ID] = true
		if n.Datacenter == "" {
			n.Datacenter = c.Datacenter
		}
		if n.Arch == "" {
			n.Arch = DefaultArch
		}
		if n.OS == "" {
			n.OS = DefaultOS
		}
		if n.Status == "" {
			n.Status = "ready"
		}
		if !validNodeStatus(n.Status) {
			return c, fmt.Errorf("nomadsim: config: node %q: invalid status %q", n.Name, n.Status)
		}
		if n.Eligibility == "" {
			n.Eligibility = "eligible"
		}
		if n.Eligibility != "eligible" && n.Eligibility != "ineligible" {
			return c, fmt.Errorf("nomadsim: config: node %q: invalid eligibility %q", n.Name, n.Eligibility)
		}
		if n.Drivers == nil {
			n.Drivers = map[string]bool{"docker": true}
		}
		if n.MemoryMB <= 0 {
			n.MemoryMB = DefaultMemoryMB
		}
		if n.DiskMB <= 0 {
			n.DiskMB = DefaultDiskMB
		}
		if n.CPUMHz <= 0 {
			n.CPUMHz = DefaultCPUMHz
		}
		if n.ReservedCPUMHz < 0 || n.ReservedCPUMHz > n.CPUMHz || n.ReservedMemoryMB < 0 || n.ReservedMemoryMB > n.MemoryMB {
			return c, fmt.Errorf("nomadsim: config: node %q: reserved resources must be within [0, the node's]", n.Name)
		}
		nodes[i] = n
	}
	c.Nodes = nodes
	return c, nil
}

func validNodeStatus(s string) bool {
	switch s {
	case "ready", "down", "initializing", "disconnected":
		return true
	}
	return false
}

// newUUID returns a random RFC 4122 version 4 UUID, as Nomad's IDs look.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
