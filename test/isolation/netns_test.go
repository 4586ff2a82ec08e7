package isolation

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// newNetns creates a network namespace named prefix+pid (unique per run, so
// parallel runs never collide) with its loopback up, and deletes it when
// the test ends, whatever happened. Deleting it deletes its interfaces and
// every route through them.
func newNetns(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, os.Getpid())
	if r := execute(t, "ip", "netns", "add", name); r.code != 0 {
		if strings.Contains(r.stderr, "File exists") {
			t.Fatalf("netns %s already exists (left by a crashed run?): %s", name, r)
		}
		t.Skipf("cannot create a network namespace here (%s): %s", name, strings.TrimSpace(r.stderr))
	}
	t.Cleanup(func() {
		if r := execute(t, "ip", "netns", "delete", name); r.code != 0 {
			t.Errorf("delete netns %s: %s", name, r)
		}
	})
	must(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// ipn runs `ip -n NS ARGS...`, which must succeed.
func ipn(t *testing.T, ns string, args ...string) {
	t.Helper()
	must(t, "ip", append([]string{"-n", ns}, args...)...)
}

// inNetns runs fn on an OS thread moved into netns ns: sockets fn creates
// live in ns. The thread is never unlocked, so it ends with the goroutine
// and never runs anything else in ns.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if ns != "" {
			f, err := os.Open(filepath.Join("/run/netns", ns))
			if err != nil {
				errc <- err
				return
			}
			defer func() { _ = f.Close() }()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				errc <- fmt.Errorf("setns %s: %w", ns, err)
				return
			}
		}
		errc <- fn()
	}()
	return <-errc
}

// checkRoute fails the test unless netns ns routes dst through dev: a probe
// is only sent where the test knows it goes.
func checkRoute(t *testing.T, ns, dst, dev string) {
	t.Helper()
	name, args := inNS(ns, "ip", "-4", "route", "get", dst)
	out := must(t, name, args...)
	if !strings.Contains(out, " dev "+dev+" ") && !strings.HasSuffix(strings.TrimSpace(out), " dev "+dev) {
		t.Fatalf("netns %q routes %s as %q, not through the test's %s: refusing to probe", ns, dst, strings.TrimSpace(out), dev)
	}
}
