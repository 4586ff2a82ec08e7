package isolation

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"sandgate/render/isolation"
)

// dockerChains are the chains Docker itself manages in the filter table.
var dockerChains = []string{"FORWARD", "DOCKER", "DOCKER-ISOLATION-STAGE-1", "DOCKER-ISOLATION-STAGE-2"}

// comparable is the host's filter table as this test judges it: Docker's
// rules for bridges other than the test's own are left out (Docker writes
// and deletes them as networks come and go on the same engine; the test
// neither made them nor may judge them). Everything else must be exactly as
// before: every chain and its policy, INPUT, OUTPUT, DOCKER-USER, any other
// chain, Docker's rules that name no bridge, and Docker's rules for the
// test's own bridges (which must all be gone again).
func comparable(table string, ours ...string) string {
	var b strings.Builder
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "-A" && slices.Contains(dockerChains, f[1]) {
			var ifaces []string
			for i := 2; i+1 < len(f); i++ {
				if f[i] == "-i" || f[i] == "-o" {
					ifaces = append(ifaces, f[i+1])
				}
			}
			if len(ifaces) > 0 && !slices.ContainsFunc(ifaces, func(i string) bool { return slices.Contains(ours, i) }) {
				continue
			}
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// The bundle applied for real on this host with Docker: it creates the
// network, and from a container on it the host's Nomad port and a metadata
// address are unreachable, while the same probes pass from a container on a
// plain network and from the same container once the rules are removed.
// The network and bridge take a per-run name instead of sandgate-egress,
// so a real installation on this host is never touched. The bundle applies
// in this host's own network namespace, whose listeners the script reads:
// a Nomad server on this host (a developer's, the end-to-end suite's) would
// rightly make it refuse. So the script is the test rendering whose
// control-plane indicators read a fake worker's facts (newFakeWorker)
// instead of this host's; TestApplyRefusesOnAControlPlane proves them on
// the script `sandgate isolation render` prints.
func TestTheBundleIsolatesARealDockerContainer(t *testing.T) {
	requireRootAndTools(t, "ip", "iptables", "iptables-save", "bash")
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed")
	}
	if r := execute(t, "docker", "info", "--format", "{{.ServerVersion}}"); r.code != 0 {
		t.Skipf("no Docker engine answers: %s", strings.TrimSpace(r.stderr))
	}
	pid := os.Getpid()
	net, ctl := fmt.Sprintf("sgd%d", pid), fmt.Sprintf("sgk%d", pid)
	pristine := filterTable(t, "")
	image := busyboxImage(t)
	subnets := freePrefixes(t, "172.31.192.0/18", 24, 2)
	link := freePrefixes(t, "203.0.113.0/24", 30, 1)[0]

	// The metadata test host: a netns owning 169.254.169.254, routed from
	// this host explicitly through its veth (the route goes with the netns).
	meta := newNetns(t, "sgm")
	hostEnd, metaEnd := link.Addr().Next(), link.Addr().Next().Next()
	must(t, "ip", "link", "add", meta, "type", "veth", "peer", "name", "eth0", "netns", meta)
	must(t, "ip", "addr", "add", hostEnd.String()+"/30", "dev", meta)
	must(t, "ip", "link", "set", meta, "up")
	ipn(t, meta, "addr", "add", metaEnd.String()+"/30", "dev", "eth0")
	ipn(t, meta, "link", "set", "eth0", "up")
	ipn(t, meta, "addr", "add", metadataAddr+"/32", "dev", "lo")
	ipn(t, meta, "route", "add", "default", "via", hostEnd.String())
	must(t, "ip", "route", "add", metadataAddr+"/32", "via", metaEnd.String(), "dev", meta)
	checkRoute(t, "", metadataAddr, meta)
	metadata := target{"cloud metadata", "tcp", metadataAddr + ":80", meta, ""}
	serve(t, metadata)

	ctlGW := dockerNetwork(t, ctl, subnets[1])
	cfg := isolation.DefaultConfig()
	cfg.Bridge, cfg.Subnet = net, subnets[0].String()
	worker := newFakeWorker(t)
	script := writeProbeRootScript(t, cfg, string(worker))
	t.Cleanup(func() { runScript(t, "", script, "--remove") })

	if r := runScript(t, "", script, "--apply"); r.code != 0 {
		t.Fatalf("apply: %s", r)
	} else if !strings.Contains(r.stderr, "control-plane indicator reads "+string(worker)+", NOT this host") {
		t.Fatalf("apply does not warn that its indicators read %s: %s", worker, r)
	}
	if r := runScript(t, "", script, "--apply"); r.code != 0 || strings.Contains(r.stdout, "added") {
		t.Fatalf("second apply: %s, want exit 0 adding nothing", r)
	}
	if r := runScript(t, "", script, "--verify"); r.code != 0 {
		t.Fatalf("verify: %s", r)
	}
	gw := strings.TrimSpace(must(t, "docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", net))
	hostNomad := target{"host's nomad", "tcp", gw + ":4646", "", ""}
	ctlNomad := target{"host's nomad", "tcp", ctlGW + ":4646", "", ""}
	serve(t, hostNomad)
	serve(t, ctlNomad)

	box, ctlBox := net+"-box", ctl+"-box"
	removeBox := startBox(t, image, box, net)
	startBox(t, image, ctlBox, ctl)
	checkRoute(t, "", metadataAddr, meta)
	// The rules are IPv4: the container must have no IPv6 at all.
	if v6 := strings.TrimSpace(must(t, "docker", "exec", box, "/bin/busybox", "cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6")); v6 != "1" {
		t.Errorf("IPv6 is on in %s (disable_ipv6 = %q): the IPv4 rules would not cover it", box, v6)
	} else {
		t.Logf("%s has IPv6 disabled (net.ipv6.conf.all.disable_ipv6 = 1): IPv4 rules cover all its traffic", box)
	}

	// Positive control: a container on a plain network reaches both.
	for _, tg := range []target{ctlNomad, metadata} {
		if !boxProbe(t, "plain network", ctlBox, tg) {
			t.Errorf("%s -> %s: want reached (control)", ctlBox, tg.addr)
		}
	}
	tag := isolation.DefaultCommentTag + " "
	for _, p := range []struct {
		tg   target
		rule string
	}{
		{hostNomad, tag + "keep " + net + " off the host"},
		{ctlNomad, tag + "keep " + net + " off the host"},
		{metadata, tag + "link-local-and-metadata 169.254.0.0/16"},
	} {
		if boxProbe(t, "isolated network", box, p.tg) {
			t.Errorf("%s -> %s: reached, want dropped", box, p.tg.addr)
		} else if n := ruleHits(t, "")[p.rule]; n == 0 {
			t.Errorf("%s -> %s: not counted by %q", box, p.tg.addr, p.rule)
		} else {
			t.Logf("dropped  %s -> %s by %q (%d packets so far)", box, p.tg.addr, p.rule, n)
		}
	}

	// The same container reaches both once the rules alone are removed.
	if r := runScript(t, "", script, "--remove", "--firewall-only"); r.code != 0 {
		t.Fatalf("remove --firewall-only: %s", r)
	}
	for _, tg := range []target{hostNomad, metadata} {
		if !boxProbe(t, "rules removed", box, tg) {
			t.Errorf("%s -> %s without the rules: want reached (control)", box, tg.addr)
		}
	}
	if r := runScript(t, "", script, "--apply"); r.code != 0 || !strings.Contains(r.stdout, "present  network "+net) {
		t.Fatalf("re-apply over the existing network: %s", r)
	}

	// Remove refuses while a container is attached, and changes nothing.
	applied := filterTable(t, "")
	if r := runScript(t, "", script, "--remove"); r.code == 0 || filterTable(t, "") != applied {
		t.Fatalf("remove with a container attached: %s, want a refusal that changes nothing", r)
	}
	removeBox()
	if r := runScript(t, "", script, "--remove"); r.code != 0 {
		t.Fatalf("remove: %s", r)
	}
	if r := execute(t, "docker", "network", "inspect", net); r.code == 0 {
		t.Fatalf("network %s still exists after remove", net)
	}
	execute(t, "docker", "rm", "-f", ctlBox)
	must(t, "docker", "network", "rm", ctl)
	if got, want := comparable(filterTable(t, ""), net, ctl), comparable(pristine, net, ctl); got != want {
		t.Fatalf("the host's filter table differs from before the test:\nbefore:\n%s\nafter:\n%s", want, got)
	}
}
