package isolation

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The script's control-plane indicators read /proc: the running `nomad
// agent` command lines and, through /proc/net, the listeners of the
// network namespace the script runs in. A script run in a test netns
// therefore also gets a pid and mount namespace of its own, with its own
// /proc, so that it sees the processes the test starts there and none of
// this host's (a developer's Nomad, the end-to-end suite's `nomad agent
// -server`), while it reads the netns's listeners, the hostname and the
// config dir as on a real host. The script is exactly what `sandgate
// isolation render` prints: nothing in it is stubbed.

// pidNS is a pid and mount namespace inside a test netns, with its own
// /proc, held open by its init (a bounded sleep) until the test ends.
type pidNS struct {
	init int // the init's pid as this host sees it
}

// newPidNS creates a pidNS inside netns ns.
func newPidNS(t *testing.T, ns string) *pidNS {
	t.Helper()
	requireRootAndTools(t, "unshare", "nsenter", "sleep")
	// `ip netns exec` execs unshare; unshare forks the init, which mounts
	// the namespace's /proc and then runs sleep. --kill-child ends the
	// namespace (every process in it) when unshare ends.
	cmd := exec.Command("ip", "netns", "exec", ns, "unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sleep", "300") //nolint:gosec // the tests' own netns
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &pidNS{init: waitForChild(t, cmd.Process.Pid, "sleep")}
}

// nsenter prefixes argv with the nsenter arguments that run it in p (its
// pid, mount and network namespaces) in directory dir (entering a mount
// namespace moves to its root otherwise).
func (p *pidNS) nsenter(dir string, argv ...string) []string {
	return append([]string{"-t", strconv.Itoa(p.init), "-p", "-m", "-n", "--wd=" + dir, "--"}, argv...)
}

// runScript runs the script in p with the given mode flags.
func (p *pidNS) runScript(t *testing.T, script string, flags ...string) result {
	t.Helper()
	r := execute(t, "nsenter", p.nsenter("/", append([]string{"bash", script}, flags...)...)...)
	t.Logf("%s %s (own pid namespace): exit %d", filepath.Base(script), strings.Join(flags, " "), r.code)
	return r
}

// start runs argv in p, in directory dir, with env added to this process's
// environment, until the test ends; it returns once argv runs.
func (p *pidNS) start(t *testing.T, dir string, env []string, argv ...string) {
	t.Helper()
	cmd := exec.Command("nsenter", p.nsenter(dir, argv...)...) //nolint:gosec // the tests' own commands
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// nsenter forks the command into the pid namespace and waits for it.
	child := waitForChild(t, cmd.Process.Pid, argv[0])
	t.Cleanup(func() {
		_ = syscall.Kill(child, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// waitForChild waits until process parent has a child running argv0 (as
// its command line's first word) and returns the child's pid.
func waitForChild(t *testing.T, parent int, argv0 string) int {
	t.Helper()
	children := fmt.Sprintf("/proc/%d/task/%d/children", parent, parent)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(children) //nolint:gosec // /proc of the tests' own process
		if err != nil {
			t.Fatalf("read %s: %v", children, err)
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if first, _, _ := strings.Cut(string(cmdline), "\x00"); first == argv0 {
				return pid
			}
		}
	}
	t.Fatalf("process %d started no %s within 10s", parent, argv0)
	return 0
}
