// Package localnomad runs a real Nomad cluster on this machine's loopback:
// one server-only agent and client-only agents with the docker driver, as
// sandgate's workers run it. It is what `sandgate dev --nomad-agent` (make
// run-nomad) brings up for a developer and what the end-to-end suite
// (test/e2e) starts its agents with, so both run the same configuration.
//
// A single `nomad agent -dev` will not do for sandgate: its only node runs a
// server, a control plane that P2 refuses. The client agent here is given
// the machine's first network interface other than lo, so its node has an
// address other than the server's and server co-location is not matched;
// all traffic still goes to 127.0.0.1.
//
// A client agent with the docker driver needs root (it mounts the alloc
// dirs) and a Docker engine.
package localnomad

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// ServerHCL is the server-only agent: name, data dir, http, rpc and serf
// ports. Heartbeats are short so a stopped client is marked down within
// seconds, but not so short that a busy machine loses a node by accident.
const ServerHCL = `name = %q
data_dir = %q
bind_addr = "127.0.0.1"
advertise { http = "127.0.0.1" rpc = "127.0.0.1" serf = "127.0.0.1" }
ports { http = %d rpc = %d serf = %d }
server {
  enabled = true
  bootstrap_expect = 1
  heartbeat_grace = "4s"
  min_heartbeat_ttl = "2s"
}
client { enabled = false }
consul { auto_advertise = false server_auto_join = false client_auto_join = false }
disable_update_check = true
log_level = "INFO"
`

// ClientHCL is a client-only agent with the docker plugin as sandgate's
// workers run it: name, data dir, http, rpc and serf ports, the server's
// RPC address and the network interface. Local images cannot be pulled
// again, so the driver never removes them.
const ClientHCL = `name = %q
data_dir = %q
bind_addr = "127.0.0.1"
advertise { http = "127.0.0.1" rpc = "127.0.0.1" serf = "127.0.0.1" }
ports { http = %d rpc = %d serf = %d }
server { enabled = false }
client {
  enabled = true
  servers = [%q]
  network_interface = %q
}
consul { auto_advertise = false server_auto_join = false client_auto_join = false }
plugin "docker" {
  config {
    allow_privileged = false
    volumes { enabled = false }
    gc { image = false }
  }
}
disable_update_check = true
log_level = "INFO"
`

// Cluster is a running server agent and the client agents started on it.
// Its methods are safe for concurrent use.
type Cluster struct {
	Bin       string      // the nomad binary
	Dir       string      // every agent's data dir, config and log are below it
	Interface string      // the client agents' network_interface
	Server    *Agent      // the server-only agent "ctl-1"
	ServerRPC string      // 127.0.0.1:PORT, the clients' server address
	API       *api.Client // a client of the server's HTTP API

	mu      sync.Mutex
	clients []*Agent
}

// ServerName is the server agent's node name.
const ServerName = "ctl-1"

// Start starts the server-only agent from bin with its files below dir and
// waits until it has elected itself leader (at most 60 s, or ctx).
func Start(ctx context.Context, bin, dir string) (*Cluster, error) {
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("localnomad: no executable Nomad binary at %s", bin)
	}
	iface, err := FirstInterface()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bin: bin, Dir: dir, Interface: iface, ServerRPC: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	adir := filepath.Join(dir, ServerName)
	hcl := fmt.Sprintf(ServerHCL, ServerName, filepath.Join(adir, "data"), ports[0], ports[1], ports[2])
	if c.Server, err = startAgent(bin, ServerName, adir, hcl, ports[0]); err != nil {
		return nil, err
	}
	if c.API, err = api.NewClient(&api.Config{Address: c.Server.HTTPAddr}); err != nil {
		c.Server.Stop()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		if leader, err := c.API.Status().Leader(); err == nil && leader != "" {
			return c, nil
		}
		select {
		case <-wctx.Done():
			c.Server.Stop()
			return nil, fmt.Errorf("localnomad: the server elected no leader: %w; its log:\n%s", wctx.Err(), c.Server.Tail(20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StartClient starts a client-only agent named name, with the given node
// meta lines (`key = "value"`), and waits until its node is ready with a
// healthy docker driver (at most 90 s, or ctx). The agent is returned even
// when the wait fails, so the caller can read its log; Close stops it.
func (c *Cluster) StartClient(ctx context.Context, name string, meta ...string) (*Agent, error) {
	return c.StartClientWith(ctx, name, ClientOptions{Meta: meta})
}

// ClientOptions shape a client agent beyond ClientHCL.
type ClientOptions struct {
	// Meta are node meta lines (`key = "value"`).
	Meta []string
	// Interface is the node's network_interface (default the cluster's):
	// "lo" gives the node the address 127.0.0.1, so what listens on its
	// ports (a task in the host's network) is reached on loopback.
	Interface string
	// MinPort and MaxPort bound the node's dynamic ports (default
	// Nomad's): agents on one machine share its ports, so each node that
	// hands out host ports needs a range of its own.
	MinPort, MaxPort int
}

// StartClientWith is StartClient with the options o.
func (c *Cluster) StartClientWith(ctx context.Context, name string, o ClientOptions) (*Agent, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	iface := c.Interface
	if o.Interface != "" {
		iface = o.Interface
	}
	dir := filepath.Join(c.Dir, name)
	hcl := fmt.Sprintf(ClientHCL, name, filepath.Join(dir, "data"), ports[0], ports[1], ports[2], c.ServerRPC, iface)
	var extra []string
	if len(o.Meta) > 0 {
		extra = append(extra, "  meta {\n"+strings.Join(o.Meta, "\n")+"\n  }")
	}
	if o.MinPort > 0 && o.MaxPort >= o.MinPort {
		extra = append(extra, fmt.Sprintf("  min_dynamic_port = %d\n  max_dynamic_port = %d", o.MinPort, o.MaxPort))
	}
	if len(extra) > 0 {
		hcl = strings.Replace(hcl, "client {\n", "client {\n"+strings.Join(extra, "\n")+"\n", 1)
	}
	a, err := startAgent(c.Bin, name, dir, hcl, ports[0])
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.clients = append(c.clients, a)
	c.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if _, err := WaitNode(wctx, c.API, name); err != nil {
		return a, fmt.Errorf("%w; the agent's log:\n%s", err, a.Tail(20))
	}
	return a, nil
}

// Clients returns every client agent started so far, stopped ones too.
func (c *Cluster) Clients() []*Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Agent(nil), c.clients...)
}

// Close purges every job of every namespace, waits (at most 20 s) for
// their containers to go, stops the agents by PID, unmounts what the
// clients left mounted and removes leftover containers of the cluster's
// allocations. It leaves Dir in place: the caller removes it or keeps it.
func (c *Cluster) Close() {
	allocs := map[string]bool{}
	q := &api.QueryOptions{Namespace: "*"}
	if list, _, err := c.API.Allocations().List(q); err == nil {
		for _, a := range list {
			allocs[a.ID] = true
		}
	}
	if jobs, _, err := c.API.Jobs().List(q); err == nil {
		for _, j := range jobs {
			_, _, _ = c.API.Jobs().Deregister(j.ID, true, &api.WriteOptions{Namespace: j.Namespace})
		}
	}
	waitContainersGone(allocs, 20*time.Second)
	clients := c.Clients()
	for _, a := range clients {
		a.Stop()
	}
	c.Server.Stop()
	for _, a := range clients {
		UnmountUnder(a.Dir)
	}
	removeContainers(allocs)
}

// WaitNode waits until the named client node is ready and its docker
// driver healthy, and returns the node.
func WaitNode(ctx context.Context, c *api.Client, name string) (*api.Node, error) {
	for {
		nodes, _, err := c.Nodes().List(nil)
		if err == nil {
			for _, n := range nodes {
				if n.Name != name || n.Status != api.NodeStatusReady {
					continue
				}
				if d, ok := n.Drivers["docker"]; ok && d.Healthy {
					node, _, err := c.Nodes().Info(n.ID, nil)
					if err == nil {
						return node, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("localnomad: node %s not ready with a healthy docker driver: %w", name, errors.Join(ctx.Err(), err))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// FirstInterface is the machine's first IPv4 interface other than lo and
// Docker's own.
func FirstInterface() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 || strings.HasPrefix(i.Name, "docker") || strings.HasPrefix(i.Name, "veth") || strings.HasPrefix(i.Name, "br-") {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return i.Name, nil
			}
		}
	}
	return "", errors.New("localnomad: no IPv4 interface other than lo")
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
