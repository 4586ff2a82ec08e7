package localnomad

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Agent is one Nomad agent process.
type Agent struct {
	Name     string
	Dir      string // its data dir ("data"), config and log ("agent.log") are here
	Config   string // its config file
	HTTPAddr string // http://127.0.0.1:PORT

	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
}

// startAgent writes the config and starts the agent; it returns once the
// HTTP API answers.
func startAgent(bin, name, dir, hcl string, httpPort int) (*Agent, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	a := &Agent{Name: name, Dir: dir, Config: filepath.Join(dir, "agent.hcl"), HTTPAddr: fmt.Sprintf("http://127.0.0.1:%d", httpPort), bin: bin}
	if err := os.WriteFile(a.Config, []byte(hcl), 0o600); err != nil {
		return nil, err
	}
	return a, a.Restart()
}

// Restart starts a stopped agent again on the same data dir and config; it
// returns once the HTTP API answers (at most 60 s).
func (a *Agent) Restart() error {
	log, err := os.OpenFile(filepath.Join(a.Dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(a.bin, "agent", "-config", a.Config) //nolint:gosec // G204: the Nomad binary the caller chose
	cmd.Stdout, cmd.Stderr = log, log
	// The agent dies with the process that started it, even when that one
	// is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	exited := make(chan struct{})
	a.mu.Lock()
	a.cmd, a.log, a.exited = cmd, log, exited
	a.mu.Unlock()
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("localnomad: nomad agent %s exited at start; its log:\n%s", a.Name, a.Tail(30))
		default:
		}
		resp, err := http.Get(a.HTTPAddr + "/v1/agent/self") //nolint:gosec,noctx // G107: the agent just started
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("localnomad: nomad agent %s did not answer within 60 s", a.Name)
}

// PID is the agent's process id, 0 when it is not running.
func (a *Agent) PID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil || a.cmd.Process == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// Stop sends SIGINT to the agent's PID and waits; SIGKILL after 20 s.
func (a *Agent) Stop() { a.Signal(os.Interrupt, 20*time.Second) }

// Kill stops the agent at once with SIGKILL, as a crash would.
func (a *Agent) Kill() { a.Signal(os.Kill, 10*time.Second) }

// Signal sends sig to the agent and waits for it to exit; SIGKILL after
// grace. A stopped agent is left as it is.
func (a *Agent) Signal(sig os.Signal, grace time.Duration) {
	a.mu.Lock()
	cmd, log, exited := a.cmd, a.log, a.exited
	a.cmd = nil
	a.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-exited:
	default:
		_ = cmd.Process.Signal(sig)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	_ = log.Close()
}

// Tail returns the last n lines of the agent's log, for error messages.
func (a *Agent) Tail(n int) string { return Tail(filepath.Join(a.Dir, "agent.log"), n) }

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path) //nolint:gosec // G304: an agent's own log file
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// UnmountUnder unmounts every mount point below dir, deepest first, as a
// Nomad client leaves its alloc dirs mounted.
func UnmountUnder(dir string) {
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

// containersOf lists the Docker containers of the given allocations (Nomad
// labels each with com.hashicorp.nomad.alloc_id).
func containersOf(allocs map[string]bool) []string {
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=com.hashicorp.nomad.alloc_id",
		"--format", `{{.ID}} {{.Label "com.hashicorp.nomad.alloc_id"}}`).Output()
	if err != nil {
		return nil
	}
	var ids []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		id, alloc, ok := strings.Cut(line, " ")
		if ok && allocs[alloc] {
			ids = append(ids, id)
		}
	}
	return ids
}

func waitContainersGone(allocs map[string]bool, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && len(containersOf(allocs)) > 0 {
		time.Sleep(300 * time.Millisecond)
	}
}

func removeContainers(allocs map[string]bool) {
	if ids := containersOf(allocs); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run() //nolint:gosec // G204: container ids docker listed
	}
}

// Freeze stops the agent's process (SIGSTOP): it holds its connections but
// answers nothing and misses its heartbeats, as a hung host would. Thaw
// resumes it.
func (a *Agent) Freeze() { a.send(syscall.SIGSTOP) }

// Thaw resumes a frozen agent (SIGCONT).
func (a *Agent) Thaw() { a.send(syscall.SIGCONT) }

func (a *Agent) send(sig syscall.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil && a.cmd.Process != nil {
		_ = a.cmd.Process.Signal(sig)
	}
}
