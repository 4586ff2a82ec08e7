package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/hashicorp/nomad/api"
)

// Agent describes the Nomad agent the client talks to.
type Agent struct {
	// Name is the agent's node name (the serf member name when unset).
	Name string
	// Version is the agent's version, e.g. "1.6.5+execfix".
	Version string
	// Region and Datacenter are the agent's own.
	Region, Datacenter string
	// Server reports whether the agent runs a server.
	Server bool
}

// Node is one Nomad client node with its full attributes.
type Node struct {
	ID, Name, Datacenter string
	// Status is "initializing", "ready", "down" or "disconnected".
	Status string
	// Eligibility is "eligible" or "ineligible".
	Eligibility string
	// Drain reports a drain in progress.
	Drain bool
	// Attributes are the fingerprinted attributes ("cpu.arch", "kernel.name",
	// "unique.hostname", "driver.docker", ...).
	Attributes map[string]string
	// Meta is the operator's node metadata.
	Meta map[string]string
	// Drivers maps each driver the node knows to whether it is detected and
	// healthy ("docker": false when the docker daemon is unreachable).
	Drivers map[string]bool
	// HTTPAddr is the node's advertised HTTP address, host:port.
	HTTPAddr string
	// Allocatable is what Nomad can allocate on the node at all:
	// NodeResources less ReservedResources. AllocatableKnown is false when
	// the node reports no NodeResources (the policy then refuses, B1).
	Allocatable      Resources
	AllocatableKnown bool
}

// Usage is a node's current resource use in percent (0-100).
type Usage struct {
	// MemoryPercent is (total - available) / total of the host's memory.
	MemoryPercent float64
	// DiskPercent is the used share of the disk holding the allocation
	// directory (the largest of the host's disks when Nomad does not report it).
	DiskPercent float64
}

// nodeInfoParallel bounds the concurrent node reads of Nodes.
const nodeInfoParallel = 8

// Ping reads /v1/agent/self: it is the cheap "does Nomad answer" check.
func (c *Client) Ping(ctx context.Context) (Agent, error) {
	return call(ctx, c, OpPing, func(ctx context.Context) (Agent, error) {
		var self api.AgentSelf
		if _, err := c.api.Raw().Query("/v1/agent/self", &self, query(ctx)); err != nil {
			return Agent{}, err
		}
		return agentFrom(&self), nil
	})
}

// agentFrom extracts the Agent from the loosely typed agent-self answer.
func agentFrom(s *api.AgentSelf) Agent {
	a := Agent{
		Name:       str(s.Config["NodeName"]),
		Region:     str(s.Config["Region"]),
		Datacenter: str(s.Config["Datacenter"]),
	}
	if a.Name == "" {
		a.Name = s.Member.Name
	}
	if v, ok := s.Config["Version"].(map[string]any); ok {
		a.Version = str(v["Version"])
		if p := str(v["VersionPrerelease"]); p != "" {
			a.Version += "-" + p
		}
		if m := str(v["VersionMetadata"]); m != "" {
			a.Version += "+" + m
		}
	}
	if a.Version == "" {
		a.Version = s.Member.Tags["build"]
	}
	if srv, ok := s.Config["Server"].(map[string]any); ok {
		a.Server, _ = srv["Enabled"].(bool)
	} else {
		a.Server = s.Stats["nomad"]["server"] == "true"
	}
	return a
}

// str returns v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// Nodes lists every client node with its full information (the list endpoint
// lacks attributes, so each node is read; a node that vanished in between is
// left out). The result is sorted by Name, then ID.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	return call(ctx, c, OpNodes, func(ctx context.Context) ([]Node, error) {
		stubs, _, err := c.api.Nodes().List(query(ctx))
		if err != nil {
			return nil, err
		}
		nodes := make([]*Node, len(stubs))
		errs := make([]error, len(stubs))
		sem := make(chan struct{}, nodeInfoParallel)
		var wg sync.WaitGroup
		for i, s := range stubs {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				nodes[i], errs[i] = c.nodeInfo(ctx, OpNodes, s.ID)
			})
		}
		wg.Wait()
		out := make([]Node, 0, len(stubs))
		for i, n := range nodes {
			if errs[i] != nil {
				if isNotFound(errs[i]) {
					continue
				}
				return nil, errs[i]
			}
			out = append(out, *n)
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Name != out[j].Name {
				return out[i].Name < out[j].Name
			}
			return out[i].ID < out[j].ID
		})
		return out, nil
	})
}

// Node returns the node whose Name is name, or ErrNotFound. When several
// nodes share the name (a node re-registered under a new ID), a ready one
// wins, then the most recently created.
func (c *Client) Node(ctx context.Context, name string) (Node, error) {
	return call(ctx, c, OpNode, func(ctx context.Context) (Node, error) {
		stubs, _, err := c.api.Nodes().List(query(ctx))
		if err != nil {
			return Node{}, err
		}
		var best *api.NodeListStub
		for _, s := range stubs { // newest first (api sorts by CreateIndex, descending)
			if s.Name != name {
				continue
			}
			if best == nil || (best.Status != "ready" && s.Status == "ready") {
				best = s
			}
		}
		if best == nil {
			return Node{}, c.newError(OpNode, 0, fmt.Sprintf("no node named %q", name), ErrNotFound)
		}
		n, err := c.nodeInfo(ctx, OpNode, best.ID)
		if err != nil {
			return Node{}, err
		}
		return *n, nil
	})
}

// nodeInfo reads one node by ID for op.
func (c *Client) nodeInfo(ctx context.Context, op, id string) (*Node, error) {
	if !validID(id) {
		return nil, c.newError(op, 0, fmt.Sprintf("invalid node id %q", id), ErrNotFound)
	}
	n, _, err := c.api.Nodes().Info(id, query(ctx))
	if err != nil {
		return nil, err
	}
	return nodeFrom(n), nil
}

// nodeFrom copies the fields the gateway uses out of an api.Node.
func nodeFrom(n *api.Node) *Node {
	out := &Node{
		ID:          n.ID,
		Name:        n.Name,
		Datacenter:  n.Datacenter,
		Status:      n.Status,
		Eligibility: n.SchedulingEligibility,
		Drain:       n.Drain || n.DrainStrategy != nil,
		Attributes:  copyMap(n.Attributes),
		Meta:        copyMap(n.Meta),
		Drivers:     make(map[string]bool, len(n.Drivers)),
		HTTPAddr:    n.HTTPAddr,
	}
	out.Allocatable, out.AllocatableKnown = allocatableOf(n)
	for name, d := range n.Drivers {
		out.Drivers[name] = d != nil && d.Detected && d.Healthy
	}
	return out
}

// copyMap returns a non-nil copy of m.
func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// NodeUsage reads the host statistics of the node with ID nodeID
// (/v1/client/stats, forwarded by the server to that node). An unknown node
// is ErrNotFound.
func (c *Client) NodeUsage(ctx context.Context, nodeID string) (Usage, error) {
	return call(ctx, c, OpNodeUsage, func(ctx context.Context) (Usage, error) {
		if !validID(nodeID) {
			return Usage{}, c.newError(OpNodeUsage, 0, fmt.Sprintf("invalid node id %q", nodeID), ErrNotFound)
		}
		st, err := c.api.Nodes().Stats(nodeID, query(ctx))
		if err != nil {
			return Usage{}, err
		}
		return usageFrom(st), nil
	})
}

// usageFrom computes the percentages of a HostStats.
func usageFrom(st *api.HostStats) Usage {
	var u Usage
	if m := st.Memory; m != nil && m.Total > 0 {
		used := m.Used
		if m.Available > 0 && m.Available <= m.Total {
			used = m.Total - m.Available
		}
		u.MemoryPercent = 100 * float64(used) / float64(m.Total)
	}
	if st.AllocDirStats != nil {
		u.DiskPercent = st.AllocDirStats.UsedPercent
	} else {
		for _, d := range st.DiskStats {
			if d != nil && d.UsedPercent > u.DiskPercent {
				u.DiskPercent = d.UsedPercent
			}
		}
	}
	return u
}

// isNotFound reports an ErrNotFound or an api 404, classified or not (used
// where absence is not a failure).
func isNotFound(err error) bool {
	var ure api.UnexpectedResponseError
	return errors.Is(err, ErrNotFound) || errors.As(err, &ure) && ure.StatusCode() == http.StatusNotFound
}
