package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"sandgate/gateway/client"
)

func TestTheHostCommandsListEnrollFreezeAndUnenroll(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	op := g.operator

	code, out, stderr := g.cli(t, op, "host", "list")
	lines := strings.Split(strings.TrimSpace(mustOK(t, code, out, stderr)), "\n")
	wantHeader := []string{"NAME", "ENROLLMENT", "STATE", "NOMAD", "MEM%", "DISK%", "SANDBOXES", "CPU", "MHZ", "MEMORY", "MB"}
	if !slices.Equal(strings.Fields(lines[0]), wantHeader) || len(lines) != 4 {
		t.Fatalf("host list:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^worker-2 +sandbox\+egress +active +ready +[0-9.]+ +[0-9.]+ +0/10 +0/8000 +0/16384$`).MatchString(out) {
		t.Fatalf("host list lacks worker-2's row:\n%s", out)
	}
	code, out, stderr = g.cli(t, op, "host", "list", "-o", "wide")
	if mustOK(t, code, out, stderr); !regexp.MustCompile(`(?m)^worker-2 +sandbox\+egress +active +ready +arm64 .* 0/10 sbx, 0/8000 MHz, 0/16384 MB$`).MatchString(out) {
		t.Fatalf("host list -o wide lacks worker-2's row:\n%s", out)
	}
	code, out, stderr = g.cli(t, op, "host", "list", "-o", "json")
	hosts := decodeJSON[struct{ Hosts []client.Host }](t, mustOK(t, code, out, stderr)).Hosts
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"control-1", "worker-1", "worker-2"}) {
		t.Fatalf("hosts %v", names)
	}

	// enrollment is a policy decision: the control plane is refused (P2)
	code, _, stderr = g.cli(t, op, "host", "enroll", "control-1")
	if code != exitDenied || !strings.Contains(stderr, "rules: ") || !strings.Contains(stderr, "P2") {
		t.Fatalf("enroll control-1: exit %d\n%s", code, stderr)
	}
	code, out, stderr = g.cli(t, op, "host", "enroll", "worker-1", "--max-sandboxes", "4", "-o", "json")
	h := decodeJSON[client.Host](t, mustOK(t, code, out, stderr))
	if h.Name != "worker-1" || h.Enrollment != "sandbox" || h.Budget.Limits.MaxSandboxes != 4 {
		t.Fatalf("enroll worker-1: %+v", h)
	}

	// a frozen node takes no new sandbox
	code, out, stderr = g.cli(t, op, "host", "state", "worker-1", "frozen")
	if mustOK(t, code, out, stderr); !regexp.MustCompile(`(?m)^state: +frozen$`).MatchString(out) || !strings.Contains(out, "reclaimed:  none") {
		t.Fatalf("freeze:\n%s", out)
	}
	if code, _, stderr = g.cli(t, op, "sandbox", "create", "--node", "worker-1"); code != exitDenied || !strings.Contains(stderr, "P3") {
		t.Fatalf("create on a frozen node: exit %d\n%s", code, stderr)
	}
	code, out, stderr = g.cli(t, op, "host", "state", "worker-1", "active", "-o", "json")
	if ch := decodeJSON[client.HostChange](t, mustOK(t, code, out, stderr)); ch.Host.State != client.HostActive {
		t.Fatalf("thaw: %+v", ch)
	}
	if code, _, stderr = g.cli(t, op, "host", "state", "worker-1", "melted"); code != exitError || !strings.Contains(stderr, "want one of active, frozen, reserved, draining") {
		t.Fatalf("unknown state: exit %d %s", code, stderr)
	}

	// unenrolling a node with a live sandbox needs --reclaim (R2)
	code, out, stderr = g.cli(t, op, "sandbox", "create", "--node", "worker-1", "-o", "json")
	id := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)).ID
	code, _, stderr = g.cli(t, op, "host", "unenroll", "worker-1")
	if code != exitDenied || !strings.HasPrefix(stderr, "sandgate: 409 ") || !strings.Contains(stderr, "\nrules: R2\n") {
		t.Fatalf("unenroll with a live sandbox: exit %d\n%s", code, stderr)
	}
	// the CLI names its flag, not the REST query (issue 21)
	if !strings.Contains(stderr, "\nhint: sandgate host unenroll worker-1 --reclaim destroys them first") || strings.Contains(stderr, "reclaim=true") {
		t.Fatalf("unenroll with a live sandbox does not hint --reclaim:\n%s", stderr)
	}
	code, out, stderr = g.cli(t, op, "host", "unenroll", "worker-1", "--reclaim", "-o", "json")
	ch := decodeJSON[client.HostChange](t, mustOK(t, code, out, stderr))
	if ch.Host.Enrollment != "none" || !slices.Equal(ch.Reclaimed, []string{id}) {
		t.Fatalf("unenroll --reclaim: %+v", ch)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "get", id, "-o", "json")
	if s := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)); s.State != client.StateEnded {
		t.Fatalf("the reclaimed sandbox is %s", s.State)
	}
}
