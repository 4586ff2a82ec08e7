package nomadsim

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// simNode is one client node. Its fields are guarded by Server.mu.
type simNode struct {
	n            *api.Node
	controlPlane bool
	memPct       float64
	diskPct      float64
	drainTimer   *time.Timer
}

const (
	nodeCores = 4
	// Nomad's node event subsystems and messages.
	subsystemCluster     = "Cluster"
	subsystemDrain       = "Drain"
	msgNodeRegistered    = "Node registered"
	msgHeartbeatMissed   = "Node heartbeat missed"
	msgReregistered      = "Node reregistered by heartbeat"
	errNoPathToNode      = "No path to node"
	msgDrainSet          = "Node drain strategy set"
	msgDrainUpdated      = "Node drain strategy updated"
	msgDrainDisabled     = "Node drain disabled"
	msgDrainComplete     = "Node drain complete"
	msgMarkedEligible    = "Node marked as eligible for scheduling"
	msgMarkedIneligible  = "Node marked as ineligible for scheduling"
	errNodeNotFound      = "node not found"
	errEligibleWhileDrn  = "can not set node's scheduling eligibility to eligible while it is draining"
	kernelArchFallback   = "x86_64"
	dockerUnhealthyDescr = "Failed to connect to docker daemon"
)

func (s *Server) buildNode(nc NodeConfig, now time.Time) *simNode {
	kernelArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[nc.Arch]
	if kernelArch == "" {
		kernelArch = kernelArchFallback
	}
	attrs := map[string]string{
		"kernel.name":               nc.OS,
		"kernel.arch":               kernelArch,
		"kernel.version":            "6.8.0-sim",
		"cpu.arch":                  nc.Arch,
		"cpu.numcores":              strconv.Itoa(nodeCores),
		"cpu.reservablecores":       strconv.Itoa(nodeCores),
		"cpu.frequency":             strconv.Itoa(nc.CPUMHz / nodeCores),
		"cpu.totalcompute":          strconv.Itoa(nc.CPUMHz),
		"cpu.modelname":             "Simulated CPU",
		"memory.totalbytes":         strconv.FormatInt(int64(nc.MemoryMB)<<20, 10),
		"os.name":                   "ubuntu",
		"os.version":                "24.04",
		"unique.hostname":           nc.Name,
		"unique.network.ip-address": nc.Address,
		"unique.storage.volume":     "/dev/vda",
		"unique.storage.bytestotal": strconv.FormatInt(int64(nc.DiskMB)<<20, 10),
		"unique.storage.bytesfree":  strconv.FormatInt(int64(nc.DiskMB)<<20, 10),
		"nomad.version":             s.cfg.Version,
		"nomad.revision":            simRevision,
		"nomad.advertise.address":   "",
		"nomad.service_discovery":   "true",
	}
	drivers := map[string]*api.DriverInfo{}
	for name, healthy := range nc.Drivers {
		d := &api.DriverInfo{Attributes: map[string]string{}, UpdateTime: now}
		if healthy {
			d.Attributes["driver."+name] = "true"
			d.Detected, d.Healthy, d.HealthDescription = true, true, "Healthy"
			attrs["driver."+name] = "1"
		} else if name == "docker" {
			d.HealthDescription = dockerUnhealthyDescr
		}
		drivers[name] = d
	}
	meta := map[string]string{}
	for k, v := range nc.Meta {
		meta[k] = v
	}
	cores := make([]uint16, nodeCores)
	for i := range cores {
		cores[i] = uint16(i) //nolint:gosec // i < nodeCores
	}
	lo := &api.NetworkResource{Mode: "host", Device: "lo", CIDR: "127.0.0.1/32", IP: "127.0.0.1", MBits: new(1000)}
	n := &api.Node{
		ID: nc.ID, Datacenter: nc.Datacenter, Name: nc.Name, Attributes: attrs,
		Resources: &api.Resources{
			CPU: new(nc.CPUMHz), Cores: new(0), MemoryMB: new(nc.MemoryMB), MemoryMaxMB: new(0),
			DiskMB: new(nc.DiskMB), IOPS: new(0), Networks: []*api.NetworkResource{lo},
		},
		Reserved: &api.Resources{CPU: new(nc.ReservedCPUMHz), Cores: new(0), MemoryMB: new(nc.ReservedMemoryMB), MemoryMaxMB: new(0), DiskMB: new(0), IOPS: new(0)},
		NodeResources: &api.NodeResources{
			Cpu:            api.NodeCpuResources{CpuShares: int64(nc.CPUMHz), TotalCpuCores: nodeCores, ReservableCpuCores: cores},
			Memory:         api.NodeMemoryResources{MemoryMB: int64(nc.MemoryMB)},
			Disk:           api.NodeDiskResources{DiskMB: int64(nc.DiskMB)},
			Networks:       []*api.NetworkResource{lo},
			MinDynamicPort: 20000, MaxDynamicPort: 32000,
		},
		ReservedResources: &api.NodeReservedResources{
			Cpu:    api.NodeReservedCpuResources{CpuShares: uint64(nc.ReservedCPUMHz)},     //nolint:gosec // G115: validated non-negative
			Memory: api.NodeReservedMemoryResources{MemoryMB: uint64(nc.ReservedMemoryMB)}, //nolint:gosec // G115: validated non-negative
		},
		Links:                 map[string]string{},
		Meta:                  meta,
		NodePool:              "default",
		CgroupParent:          "/nomad",
		SchedulingEligibility: nc.Eligibility,
		Status:                nc.Status,
		StatusUpdatedAt:       now.Unix(),
		Events:                []*api.NodeEvent{{Message: msgNodeRegistered, Subsystem: subsystemCluster, Timestamp: now.UTC().Truncate(time.Second)}},
		Drivers:               drivers,
		CSIControllerPlugins:  map[string]*api.CSIInfo{},
		CSINodePlugins:        map[string]*api.CSIInfo{},
		CreateIndex:           s.index,
		ModifyIndex:           s.index,
	}
	return &simNode{n: n, controlPlane: nc.ControlPlane}
}

// computedClass imitates Nomad's hash of the node's scheduling-relevant
// fields: nodes that schedule alike share a class.
func computedClass(n *api.Node) string {
	h := fnv.New64a()
	keys := make([]string, 0, len(n.Attributes))
	for k := range n.Attributes {
		if !strings.HasPrefix(k, "unique.") && k != "nomad.advertise.address" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s;", k, n.Attributes[k])
	}
	fmt.Fprintf(h, "dc=%s;class=%s", n.Datacenter, n.NodeClass)
	return fmt.Sprintf("v1:%d", h.Sum64())
}

// nodeWire is the server's encoding of a full node (node.json): a few
// fields the 2026 api has are not in v1.6.5 and a few are server-only.
func nodeWire(n *api.Node) obj {
	o := toObj(n)
	dropKeys(o, "GCVolumesOnNodeGC", "NodeMaxAllocs")
	o["ComputedClass"] = computedClass(n)
	o["LastAllocUpdateIndex"] = 0
	o["LastMissedHeartbeatIndex"] = 0
	o["SecretID"] = ""
	return o
}

// nodeStubWire is the server's encoding of a node list entry (nodes.json,
// nodes-resources.json).
func nodeStubWire(n *api.Node, resources bool) obj {
	stub := &api.NodeListStub{
		Address: "127.0.0.1", ID: n.ID, Datacenter: n.Datacenter, Name: n.Name,
		NodeClass: n.NodeClass, NodePool: n.NodePool, Version: n.Attributes["nomad.version"],
		Drain: n.Drain, SchedulingEligibility: n.SchedulingEligibility, Status: n.Status,
		StatusDescription: n.StatusDescription, Drivers: n.Drivers, LastDrain: n.LastDrain,
		CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
	if resources {
		stub.NodeResources = n.NodeResources
		stub.ReservedResources = n.ReservedResources
	}
	o := toObj(stub)
	o["HostVolumes"] = toWire(n.HostVolumes)
	return o
}

func (s *Server) nodeByIDLocked(id string) *simNode {
	for _, n := range s.nodes {
		if n.n.ID == id {
			return n
		}
	}
	return nil
}

func (s *Server) nodeByNameLocked(name string) (*simNode, error) {
	for _, n := range s.nodes {
		if n.n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("nomadsim: no node named %q", name)
}

// handleNodes serves GET /v1/nodes (?prefix=, ?resources=true), sorted by ID
// as the state store returns them.
func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	resources := r.URL.Query().Get("resources") == "true"
	s.mu.Lock()
	out := []any{}
	nodes := append([]*simNode(nil), s.nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].n.ID < nodes[j].n.ID })
	for _, n := range nodes {
		if strings.HasPrefix(n.n.ID, prefix) {
			out = append(out, nodeStubWire(n.n, resources))
		}
	}
	index := s.index
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, metaRead, index, out)
}

// handleNode serves /v1/node/<id>[/allocations|/drain|/eligibility].
func (s *Server) handleNode(w http.ResponseWriter, r *http.Request) {
	tail := pathTail(r, "/v1/node/")
	id, sub, _ := strings.Cut(tail, "/")
	switch {
	case sub == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		n := s.nodeByIDLocked(id)
		index := s.index
		var body obj
		if n != nil {
			body = nodeWire(n.n)
		}
		s.mu.Unlock()
		if n == nil {
			writeErrorMeta(w, r, metaRead, index, http.StatusNotFound, errNodeNotFound)
			return
		}
		writeJSON(w, http.StatusOK, metaRead, index, body)
	case sub == "allocations" && r.Method == http.MethodGet:
		s.mu.Lock()
		out := []any{}
		for _, aid := range s.allocOrder {
			if a := s.allocs[aid]; a.a.NodeID == id {
				out = append(out, allocWire(a.a))
			}
		}
		index := s.index
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, metaRead, index, out)
	case sub == "drain" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		var req api.NodeUpdateDrainRequest
		if !decodeBody(w, r, &req) {
			return
		}
		s.mu.Lock()
		resp, index, err := s.updateDrainLocked(id, req.DrainSpec, req.MarkEligible, req.Meta)
		s.mu.Unlock()
		if err != nil {
			writeError(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, metaWrite, index, nodeWriteResponse(resp, index))
	case sub == "eligibility" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		var req api.NodeUpdateEligibilityRequest
		if !decodeBody(w, r, &req) {
			return
		}
		s.mu.Lock()
		resp, index, err := s.updateEligibilityLocked(id, req.Eligibility)
		s.mu.Unlock()
		if err != nil {
			writeError(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, metaWrite, index, nodeWriteResponse(resp, index))
	default:
		writeError(w, r, http.StatusMethodNotAllowed, errInvalidMethod)
	}
}

// handleClientStats serves GET /v1/client/stats?node_id=: host stats driven
// by SetNodeUsage. Without node_id it answers for the agent's own node.
func (s *Server) handleClientStats(w http.ResponseWriter, r *http.Request) {
	nodeID := r.URL.Query().Get("node_id")
	s.mu.Lock()
	n := s.agentNodeLocked()
	if nodeID != "" {
		n = s.nodeByIDLocked(nodeID)
	}
	var stats *api.HostStats
	down := false
	if n != nil {
		down = s.nodeUnreachableLocked(n.n.ID)
		stats = hostStats(n, s.heldOnNodeLocked(n.n.ID))
	}
	s.mu.Unlock()
	switch {
	case n == nil:
		writeError(w, r, http.StatusNotFound, "Unknown node "+nodeID)
	case down:
		writeError(w, r, http.StatusNotFound, errNoPathToNode)
	default:
		// The real agent stamps each reading (Unix nanoseconds), a member
		// api.HostStats does not decode.
		o := toObj(stats)
		o["Timestamp"] = time.Now().UnixNano()
		writeJSON(w, http.StatusOK, metaNone, 0, o)
	}
}

// hostHeld is what the running allocations of a node hold of its host, in
// bytes: processes' memory (counted in Used), files in tmpfs areas (shared
// memory: lowers Available and Free but not Used, as gopsutil counts it on
// a real agent) and files on disk.
type hostHeld struct{ resident, tmpfs, disk uint64 }

// containerResidentBytes is what one running sandbox container holds of its
// host's memory before it writes anything: its init, sleep and the
// runtime's shim (a few MiB on a real agent).
const containerResidentBytes = 4 << 20

// heldOnNodeLocked sums what the running allocations on node hold: each
// container's resident memory and the files in its tmpfs areas (/workspace,
// /tmp: memory, as on a real host, where they lower MemAvailable), and the
// files written elsewhere in the container and in its task directories
// (host disk). Callers hold Server.mu.
func (s *Server) heldOnNodeLocked(nodeID string) hostHeld {
	var h hostHeld
	for _, sa := range s.allocs {
		if sa.a.NodeID != nodeID || sa.a.ClientStatus != api.AllocClientStatusRunning {
			continue
		}
		h.resident += containerResidentBytes
		if sa.cfs != nil {
			tmpfs, rest := sa.cfs.heldBytes()
			h.tmpfs += tmpfs
			h.disk += rest
		}
		if d, ok := s.taskDirs[sa.a.ID]; ok {
			for _, e := range d {
				if e.mode.IsRegular() && e.size > 0 {
					h.disk += uint64(e.size)
				}
			}
		}
	}
	return h
}

// hostStats is the node's host stats: the usage SetNodeUsage set, plus
// what its running allocations hold, so the usage moves with the sandboxes
// as it does on a real agent (capped at the host's size). The real agent's
// readings around a sandbox's writes (real-client-stats-*.json) pin which
// figure moves: a tmpfs file lowers Available and Free but leaves Used; a
// file in a task directory raises the alloc dir's Used. The page cache is
// not modelled: Free equals Available here, where a real host's Free also
// drops with every file written to disk (the gateway never reads Free).
func hostStats(n *simNode, held hostHeld) *api.HostStats {
	memTotal := uint64(*n.n.Resources.MemoryMB) << 20                              //nolint:gosec // positive by config
	diskTotal := uint64(*n.n.Resources.DiskMB) << 20                               //nolint:gosec // positive by config
	memUsed := min(memTotal, uint64(float64(memTotal)*n.memPct/100)+held.resident) //nolint:gosec // percent in 0-100
	memAvailable := memTotal - min(memTotal, memUsed+held.tmpfs)
	diskUsed := min(diskTotal, uint64(float64(diskTotal)*n.diskPct/100)+held.disk) //nolint:gosec // percent in 0-100
	diskPct := min(100, n.diskPct+100*float64(held.disk)/float64(diskTotal))
	disk := &api.HostDiskStats{
		Device: "/dev/vda", Mountpoint: "/", Size: diskTotal, Used: diskUsed,
		Available: diskTotal - diskUsed, UsedPercent: diskPct, InodesUsedPercent: diskPct / 10,
	}
	cpus := make([]*api.HostCPUStats, nodeCores)
	for i := range cpus {
		cpus[i] = &api.HostCPUStats{CPU: "cpu" + strconv.Itoa(i), Idle: 100}
	}
	return &api.HostStats{
		Memory:        &api.HostMemoryStats{Total: memTotal, Used: memUsed, Available: memAvailable, Free: memAvailable},
		CPU:           cpus,
		DiskStats:     []*api.HostDiskStats{disk},
		AllocDirStats: disk,
		DeviceStats:   []*api.DeviceGroupStats{},
		Uptime:        uint64(time.Since(time.Unix(n.n.StatusUpdatedAt, 0)).Seconds()), //nolint:gosec // non-negative
	}
}
