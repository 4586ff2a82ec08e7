package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"
)

// agent is one Nomad agent process of the suite.
type agent struct {
	name     string
	dir      string // data dir and config
	config   string // config file
	httpAddr string // http://127.0.0.1:PORT
	cmd      *exec.Cmd
	log      *os.File
	exited   chan struct{}
	// allocatable is what Nomad can allocate on a client's node
	// (NodeResources less ReservedResources), read when it became ready.
	allocatable resources
}

// resources are CPU (MHz) and memory (MB) figures.
type resources struct{ cpuMHz, memoryMB int64 }

// allocatableOf is what Nomad can allocate on n.
func allocatableOf(n *api.Node) resources {
	if n.NodeResources == nil {
		return resources{}
	}
	r := resources{n.NodeResources.Cpu.CpuShares, n.NodeResources.Memory.MemoryMB}
	if rr := n.ReservedResources; rr != nil {
		r.cpuMHz -= int64(rr.Cpu.CpuShares)     //nolint:gosec // G115: MHz
		r.memoryMB -= int64(rr.Memory.MemoryMB) //nolint:gosec // G115: MB
	}
	return r
}

// serverHCL is the server-only agent. Heartbeats are short so a stopped
// client is marked down within seconds (the lost-node test), but not so
// short that a busy machine loses a node by accident.
const serverHCL = `name = %q
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

// clientHCL is a client-only agent with the docker plugin as the SPEC's
// workers run it. network_interface gives the node an address other than
// the server's, so server co-location (P2) is not matched; all traffic
// still goes to 127.0.0.1.
const clientHCL = `name = %q
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

// firstInterface is the machine's first IPv4 interface other than lo.
func firstInterface() (string, error) {
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
	return "", errors.New("no IPv4 interface other than lo")
}

// startAgent writes the config and starts the agent; it returns once the
// HTTP API answers.
func startAgent(bin, name, dir, hcl string, httpPort int) (*agent, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	a := &agent{name: name, dir: dir, config: filepath.Join(dir, "agent.hcl"), httpAddr: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	if err := os.WriteFile(a.config, []byte(hcl), 0o600); err != nil {
		return nil, err
	}
	return a, a.start(bin)
}

func (a *agent) start(bin string) error {
	log, err := os.OpenFile(filepath.Join(a.dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "agent", "-config", a.config) //nolint:gosec // G204: the Nomad binary the suite was given
	cmd.Stdout, cmd.Stderr = log, log
	// The agent dies with the test binary, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	a.cmd, a.log, a.exited = cmd, log, make(chan struct{})
	go func() { _ = cmd.Wait(); close(a.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-a.exited:
			return fmt.Errorf("nomad agent %s exited at start; its log:\n%s", a.name, tail(filepath.Join(a.dir, "agent.log"), 30))
		default:
		}
		resp, err := http.Get(a.httpAddr + "/v1/agent/self") //nolint:gosec,noctx // G107: the agent this suite started
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("nomad agent %s did not answer within 60 s", a.name)
}

// stop sends SIGINT to the agent's PID and waits; SIGKILL after 20 s.
func (a *agent) stop() {
	a.signal(os.Interrupt, 20*time.Second)
}

// kill stops the agent at once with SIGKILL, as a crash would.
func (a *agent) kill() { a.signal(os.Kill, 10*time.Second) }

func (a *agent) signal(sig os.Signal, grace time.Duration) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	select {
	case <-a.exited:
	default:
		_ = a.cmd.Process.Signal(sig)
		select {
		case <-a.exited:
		case <-time.After(grace):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
	}
	_ = a.log.Close()
	a.cmd = nil
}

// restart starts a stopped agent again on the same data dir.
func (a *agent) restart(bin string) error { return a.start(bin) }

// unmountUnder unmounts every mount point below dir, deepest first, as a
// Nomad client leaves its alloc dirs mounted.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		p := strings.ReplaceAll(fields[1], `\040`, " ")
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	_ = f.Close()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		if err := syscall.Unmount(p, 0); err != nil {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
}

// nomadAPI is an api client for addr with no environment read.
func nomadAPI(addr string) (*api.Client, error) {
	return api.NewClient(&api.Config{Address: addr})
}

// waitNode waits until the named client node is ready and its docker
// driver healthy.
func waitNode(ctx context.Context, c *api.Client, name string) (*api.Node, error) {
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
			return nil, fmt.Errorf("node %s not ready with a healthy docker driver: %w", name, errors.Join(ctx.Err(), err))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the suite's own log files
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
