package execwrap_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sandgate/render/execwrap"
)

// StopArgs kills every process whose environment carries the exec's id,
// children included, and nothing else: run here with the host's sh, tr
// and grep over the host's /proc.
func TestStopArgsKillsTheExecsProcessTreeOnly(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc here")
	}
	start := func(id string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30; wait")
		cmd.Env = append(os.Environ(), execwrap.ExecIDEnv+"="+id)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	target, bystander := start("abc123"), start("abc1234")
	time.Sleep(200 * time.Millisecond) // the children start
	argv := execwrap.StopArgs("abc123")
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil { //nolint:gosec // G204: the package's own script
		t.Fatalf("stop: %v %s", err, out)
	}
	exited := make(chan error, 1)
	go func() { exited <- target.Wait() }()
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("the target's shell ended with %v, want killed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the target's tree still runs")
	}
	_ = bystander
	if left := strings.TrimSpace(pgrepEnv(t, "abc123")); left != "" {
		t.Fatalf("processes of the exec left: %s", left)
	}
	if strings.TrimSpace(pgrepEnv(t, "abc1234")) == "" {
		t.Fatal("the bystander's tree was killed too")
	}
}

func pgrepEnv(t *testing.T, id string) string {
	t.Helper()
	out, _ := exec.Command("/bin/sh", "-c", `for e in /proc/[0-9]*/environ; do tr '\000' '\n' < "$e" 2>/dev/null | grep -qx "SANDGATE_EXEC_ID=`+id+`" && echo "${e%/environ}"; done; exit 0`).Output() //nolint:gosec // G204: a fixed script with a test id
	return string(out)
}
