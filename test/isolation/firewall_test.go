package isolation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sandgate/render/isolation"
)

// The netns topology. "host" plays the Docker host: the bridge with the
// subnet's .1, a DOCKER-USER chain jumped to from FORWARD (as Docker leaves
// it), forwarding on. "sandbox" sits on the bridge (.2, default route via
// .1). "targets" owns every test host address on its loopback, reached from
// "host" through one veth pair and routed explicitly, address by address.
// None of the namespaces has any other link: nothing can leave the machine.
const (
	bridgeAddr  = "172.31.250.1"
	sandboxAddr = "172.31.250.2"
	hostLink    = "203.0.113.1" // host's end of the veth to targets (a /30)
	targetsLink = "203.0.113.2"
	overlayCIDR = "198.51.100.128/25"
)

type topology struct {
	host, sandbox, targets string // netns names
	probes                 []target
}

func newTopology(t *testing.T) *topology {
	t.Helper()
	tp := &topology{host: newNetns(t, "sgh"), sandbox: newNetns(t, "sgs"), targets: newNetns(t, "sgt")}
	h, s, x, br := tp.host, tp.sandbox, tp.targets, isolation.DefaultBridge

	ipn(t, h, "link", "add", br, "type", "bridge")
	ipn(t, h, "addr", "add", bridgeAddr+"/24", "dev", br)
	ipn(t, h, "link", "set", br, "up")
	must(t, "ip", "netns", "exec", h, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
	for _, rule := range [][]string{{"-N", "DOCKER-USER"}, {"-A", "FORWARD", "-j", "DOCKER-USER"}, {"-A", "DOCKER-USER", "-j", "RETURN"}} {
		iptIn(t, h, rule...)
	}

	ipn(t, h, "link", "add", "vsbx", "type", "veth", "peer", "name", "eth0", "netns", s)
	ipn(t, h, "link", "set", "vsbx", "master", br, "up")
	ipn(t, s, "addr", "add", sandboxAddr+"/24", "dev", "eth0")
	ipn(t, s, "link", "set", "eth0", "up")
	ipn(t, s, "route", "add", "default", "via", bridgeAddr)

	ipn(t, h, "link", "add", "vtgt", "type", "veth", "peer", "name", "eth0", "netns", x)
	ipn(t, h, "addr", "add", hostLink+"/30", "dev", "vtgt")
	ipn(t, h, "link", "set", "vtgt", "up")
	ipn(t, x, "addr", "add", targetsLink+"/30", "dev", "eth0")
	ipn(t, x, "link", "set", "eth0", "up")
	ipn(t, x, "route", "add", "172.31.250.0/24", "via", hostLink)

	tag := isolation.DefaultCommentTag + " "
	tp.probes = []target{
		{"rfc1918 10/8", "tcp", "10.99.0.1:8080", x, tag + "rfc1918 10.0.0.0/8"},
		{"rfc1918 172.16/12", "tcp", "172.20.0.1:8080", x, tag + "rfc1918 172.16.0.0/12"},
		{"rfc1918 192.168/16", "tcp", "192.168.77.1:8080", x, tag + "rfc1918 192.168.0.0/16"},
		{"cgnat", "tcp", "100.64.0.10:8080", x, tag + "cgnat 100.64.0.0/10"},
		{"cloud metadata", "tcp", "169.254.169.254:80", x, tag + "link-local-and-metadata 169.254.0.0/16"},
		{"overlay", "tcp", "198.51.100.130:8080", x, tag + "overlay " + overlayCIDR},
		{"nomad http", "tcp", "198.51.100.10:4646", x, tag + "nomad tcp/4646"},
		{"nomad rpc", "tcp", "198.51.100.10:4647", x, tag + "nomad tcp/4647"},
		{"nomad serf", "tcp", "198.51.100.10:4648", x, tag + "nomad tcp/4648"},
		{"nomad serf", "udp", "198.51.100.10:4648", x, tag + "nomad udp/4648"},
		{"ssh", "tcp", "198.51.100.10:22", x, tag + "ssh tcp/22"},
		{"host's nomad", "tcp", bridgeAddr + ":4646", h, tag + "keep " + br + " off the host"},
		{"allowed web", "tcp", "198.51.100.20:8080", x, ""},
		{"allowed dns", "udp", "198.51.100.20:53", x, ""},
	}
	routed := map[string]bool{}
	for _, tg := range tp.probes {
		ip := strings.Split(tg.addr, ":")[0]
		if tg.ns == x && !routed[ip] {
			routed[ip] = true
			ipn(t, x, "addr", "add", ip+"/32", "dev", "lo")
			ipn(t, h, "route", "add", ip+"/32", "via", targetsLink, "dev", "vtgt")
		}
		serve(t, tg)
	}
	for ip := range routed {
		checkRoute(t, s, ip, "eth0")
		checkRoute(t, h, ip, "vtgt")
	}
	return tp
}

// workerHCL is a Nomad client's configuration: a client, not a server (its
// server block is disabled), with worker meta.
const workerHCL = `# a worker
name = "worker-1"
server {
  enabled = false
}
client {
  enabled = true
  meta {
    "node-role" = "worker"
  }
}
`

// workerConfigDir is a directory holding workerHCL.
func workerConfigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "client.hcl"), []byte(workerHCL), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// expectReached fails the test for every probe that did not reach its target.
func expectReached(t *testing.T, outs []outcome) {
	t.Helper()
	for _, o := range outs {
		if !o.reached() {
			t.Errorf("%s %s (%s): %s, want reached", o.proto, o.addr, o.what, o)
		}
	}
}

func TestTheBundleDropsWhatItMustWithRealIptables(t *testing.T) {
	requireRootAndTools(t, "ip", "iptables", "iptables-save", "bash", "unshare")
	tp := newTopology(t)
	h := tp.host
	cfg := isolation.DefaultConfig()
	cfg.Overlays = []string{overlayCIDR}
	cfg.NomadConfigDir = workerConfigDir(t)
	script := writeScript(t, cfg)
	pristine := filterTable(t, h)

	// Positive control: without the bundle every probe gets through.
	expectReached(t, probeAll(t, "before apply", tp.sandbox, tp.probes))
	if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 1 {
		t.Fatalf("verify before apply: %s, want exit 1", r)
	}

	// Apply twice: the second changes nothing.
	if r := runScript(t, h, script, "--apply", "--firewall-only"); r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	applied := filterTable(t, h)
	if r := runScript(t, h, script, "--apply", "--firewall-only"); r.code != 0 || strings.Contains(r.stdout, "added") {
		t.Fatalf("second apply: %s, want exit 0 adding nothing", r)
	}
	if again := filterTable(t, h); again != applied {
		t.Fatalf("the second apply changed the rule set:\nfirst:\n%s\nsecond:\n%s", applied, again)
	}
	t.Logf("rule set after apply:\n%s", applied)
	if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 0 {
		t.Fatalf("verify after apply: %s", r)
	}

	// Every probe that must be dropped times out; the allowed ones pass;
	// the rule meant to drop each probe counted its packets.
	outs := probeAll(t, "after apply", tp.sandbox, tp.probes)
	hits := ruleHits(t, h)
	for _, o := range outs {
		switch {
		case o.rule == "" && !o.reached():
			t.Errorf("%s %s (%s) must stay reachable: %s", o.proto, o.addr, o.what, o)
		case o.rule != "" && !o.timeout:
			t.Errorf("%s %s (%s): %s, want dropped", o.proto, o.addr, o.what, o)
		case o.rule != "" && hits[o.rule] == 0:
			t.Errorf("%s %s (%s) was not counted by %q (counters %v)", o.proto, o.addr, o.what, o.rule, hits)
		case o.rule != "":
			t.Logf("dropped  %s %-21s by %q (%d packets)", o.proto, o.addr, o.rule, hits[o.rule])
		}
	}

	t.Run("verify notices a missing rule and apply restores it", func(t *testing.T) {
		iptIn(t, h, "-D", isolation.DefaultChain,
			"-d", "169.254.0.0/16", "-m", "comment", "--comment", isolation.DefaultCommentTag+" link-local-and-metadata 169.254.0.0/16", "-j", "DROP")
		if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 1 || !strings.Contains(r.stderr, "missing  "+isolation.DefaultChain+" -d 169.254.0.0/16") {
			t.Fatalf("verify without the metadata drop: %s", r)
		}
		if r := runScript(t, h, script, "--apply", "--firewall-only"); r.code != 0 {
			t.Fatalf("apply: %s", r)
		}
		if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 0 {
			t.Fatalf("verify after repair: %s", r)
		}
	})

	t.Run("a rule put ahead of the jump fails verify, apply moves the jump back, remove leaves the other rule", func(t *testing.T) {
		foreign := []string{"-s", "192.0.2.99/32", "-j", "RETURN"}
		iptIn(t, h, append([]string{"-I", "DOCKER-USER", "1"}, foreign...)...)
		if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 1 || !strings.Contains(r.stderr, "not first in DOCKER-USER") {
			t.Fatalf("verify with a rule ahead of the jump: %s", r)
		}
		if r := runScript(t, h, script, "--apply", "--firewall-only"); r.code != 0 || !strings.Contains(r.stdout, "moved    DOCKER-USER") {
			t.Fatalf("apply: %s", r)
		}
		if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 0 {
			t.Fatalf("verify after the move: %s", r)
		}
		iptIn(t, h, append([]string{"-C", "DOCKER-USER"}, foreign...)...)
		iptIn(t, h, append([]string{"-D", "DOCKER-USER"}, foreign...)...)
	})

	t.Run("verify notices a rule it did not add to its chain and remove takes it along", func(t *testing.T) {
		iptIn(t, h, "-I", isolation.DefaultChain, "1", "-d", "198.51.100.20/32", "-j", "ACCEPT")
		if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 1 || !strings.Contains(r.stderr, "holds 19 rules, want 18") {
			t.Fatalf("verify with a foreign rule in the chain: %s", r)
		}
	})

	// Remove: the rule set is back to what it was, exactly; twice is fine.
	for i := range 2 {
		if r := runScript(t, h, script, "--remove", "--firewall-only"); r.code != 0 {
			t.Fatalf("remove #%d: %s", i+1, r)
		}
		if got := filterTable(t, h); got != pristine {
			t.Fatalf("after remove #%d the filter table differs from before apply:\nbefore:\n%s\nafter:\n%s", i+1, pristine, got)
		}
	}
	if r := runScript(t, h, script, "--verify", "--firewall-only"); r.code != 1 {
		t.Fatalf("verify after remove: %s, want exit 1", r)
	}
	expectReached(t, probeAll(t, "after remove", tp.sandbox, tp.probes))
}
