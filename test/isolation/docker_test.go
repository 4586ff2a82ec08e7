package isolation

import (
	"debug/elf"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const metadataAddr = "169.254.169.254"

// busyboxImage builds a tiny image FROM scratch holding Debian's static
// busybox, tagged for this run, and removes it when the test ends.
func busyboxImage(t *testing.T) string {
	t.Helper()
	const bin = "/bin/busybox"
	f, err := elf.Open(bin)
	if err != nil {
		t.Skipf("%s is missing or unreadable (apt-get install -y busybox-static): %v", bin, err)
	}
	dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	_ = f.Close()
	if dynamic {
		t.Skipf("%s is dynamically linked and cannot run FROM scratch (apt-get install -y busybox-static)", bin)
	}
	ctx := t.TempDir()
	must(t, "cp", bin, filepath.Join(ctx, "busybox"))
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT [\"/bin/busybox\"]\n"
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(dockerfile), 0o600); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("sandgate-test/busybox:%d", os.Getpid())
	must(t, "docker", "build", "-q", "-t", tag, ctx)
	t.Cleanup(func() { execute(t, "docker", "rmi", "-f", tag) })
	return tag
}

// freePrefixes returns n prefixes of the given length inside within that
// overlap no route of this host (and so no Docker network either).
func freePrefixes(t *testing.T, within string, bits, n int) []netip.Prefix {
	t.Helper()
	var used []netip.Prefix
	for _, line := range strings.Split(must(t, "ip", "-4", "route", "show", "table", "all"), "\n") {
		// The destination is the first field that parses ("local 127.0.0.0/8 ...").
		for _, f := range strings.Fields(line) {
			if !strings.Contains(f, "/") {
				f += "/32"
			}
			if p, err := netip.ParsePrefix(f); err == nil {
				used = append(used, p.Masked())
				break
			}
		}
	}
	outer := netip.MustParsePrefix(within)
	var out []netip.Prefix
	for a := outer.Addr(); outer.Contains(a) && len(out) < n; {
		p := netip.PrefixFrom(a, bits)
		if !slices.ContainsFunc(used, p.Overlaps) {
			out = append(out, p)
		}
		next := p.Addr()
		for range 1 << (32 - bits) {
			next = next.Next()
		}
		a = next
	}
	if len(out) < n {
		t.Skipf("no %d free /%d in %s on this host", n, bits, within)
	}
	return out
}

// dockerNetwork creates a plain bridge network named name (also its bridge).
func dockerNetwork(t *testing.T, name string, subnet netip.Prefix) string {
	t.Helper()
	gw := subnet.Addr().Next().String()
	must(t, "docker", "network", "create", "--subnet", subnet.String(), "--gateway", gw,
		"-o", "com.docker.network.bridge.name="+name, name)
	t.Cleanup(func() { execute(t, "docker", "network", "rm", name) })
	return gw
}

// startBox starts a busybox container on network and removes it when the
// test ends (or earlier, through the returned function).
func startBox(t *testing.T, image, name, network string) func() {
	t.Helper()
	must(t, "docker", "run", "-d", "--name", name, "--network", network, image, "sleep", "300")
	stop := func() { execute(t, "docker", "rm", "-f", name) }
	t.Cleanup(stop)
	return stop
}

// boxProbe connects from inside container box to addr (host:port) with
// busybox nc and reports whether the target's banner came back; a probe
// that fails must have timed out (dropped), never been refused.
func boxProbe(t *testing.T, phase, box string, tg target) bool {
	t.Helper()
	host, port, _ := strings.Cut(tg.addr, ":")
	r := execute(t, "docker", "exec", box, "/bin/busybox", "nc", "-w", "1", host, port)
	ok := r.code == 0 && strings.TrimSpace(r.stdout) == tg.banner()
	t.Logf("%-22s %-14s -> %-21s %-14s %s", phase, box, tg.addr, tg.what, map[bool]string{true: "reached", false: "no answer: " + strings.TrimSpace(r.stderr)}[ok])
	if !ok && strings.Contains(r.stderr, "refused") {
		t.Errorf("%s -> %s was refused, not dropped: the probe did not test the rules", box, tg.addr)
	}
	return ok
}
