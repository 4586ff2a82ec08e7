package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
)

// variant is one image and profile of the matrix (network none).
type variant struct {
	image, profile string
}

var variants = []variant{
	{imageBusybox, "strict"}, {imageBusybox, "workspace"},
	{imageDebian, "strict"}, {imageDebian, "workspace"},
}

func (v variant) name() string {
	img := strings.TrimPrefix(v.image, "sandgate-e2e/")
	img = img[:strings.IndexByte(img, ':')]
	return img + "/" + v.profile
}

// workspaceCapMask is CapEff/CapBnd with exactly the workspace profile's eight
// capabilities: CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, FSETID 4, KILL 5,
// SETGID 6, SETUID 7, SETFCAP 31.
const workspaceCapMask = "00000000800000fb"

// TestSandboxesOnARealAgent drives every variant through the agent flow,
// checks its hardening from inside (through the exec API) and from docker
// inspect on the host, and the exec semantics, then destroys it.
func TestSandboxesOnARealAgent(t *testing.T) {
	g := startGateway(t, gwOptions{Agents: []string{"e2e-agent"}})
	agent := g.agents["e2e-agent"]
	for _, v := range variants {
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			sb := g.create(t, agent, map[string]any{"image": v.image, "profile": v.profile, "memory_mb": 512, "ttl_seconds": 900})
			t.Run("agent flow", func(t *testing.T) { agentFlow(t, g, agent, sb) })
			t.Run("hardening inside", func(t *testing.T) { hardeningInside(t, g, sb, v) })
			t.Run("hardening on the host", func(t *testing.T) { hardeningOnHost(t, g, sb, v) })
			t.Run("exec", func(t *testing.T) { execSemantics(t, g, sb) })
			t.Run("destroy", func(t *testing.T) { destroy(t, g, sb) })
		})
	}
}

func agentFlow(t *testing.T, g *gw, agent string, sb apitest.Created) {
	if r := g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+sb.ID, sb.Token, nil); r.Status != http.StatusOK || r.JSON(t)["state"] != "running" {
		t.Fatalf("status with the session token: %s", r)
	}
	res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"echo", "hi"}})
	if res.code() != 0 || res.Stdout != "hi\n" || res.TimedOut {
		t.Fatalf("exec echo hi: %+v", res)
	}
	if r := g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+sb.ID+"/logs?stream=stdout&tail_bytes=4096", sb.Token, nil); r.Status != http.StatusOK {
		t.Fatalf("logs: %s", r)
	}
	if r := g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+sb.ID+"/logs?stream=stderr", sb.Token, nil); r.Status != http.StatusOK {
		t.Fatalf("stderr logs: %s", r)
	}
	// The session token is refused everywhere but its own sandbox's
	// status, exec, logs and destroy (T2).
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/sandboxes", nil},
		{http.MethodPost, "/v1/sandboxes", map[string]any{}},
		{http.MethodPost, "/v1/sandboxes/" + sb.ID + "/extend", map[string]any{"ttl_seconds": 600}},
		{http.MethodGet, "/v1/hosts", nil},
		{http.MethodGet, "/v1/tokens", nil},
	} {
		r := g.api(t).Do(c.method, c.path, sb.Token, c.body)
		if m := apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied"); !slices.Contains(toStrings(m["rule_ids"]), "T2") {
			t.Fatalf("%s %s with a session token: want T2, got %s", c.method, c.path, r)
		}
	}
	// The agent sees its sandbox in its list.
	if r := g.api(t).Do(http.MethodGet, "/v1/sandboxes", agent, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), sb.ID) {
		t.Fatalf("agent list: %s", r)
	}
}

func hardeningInside(t *testing.T, g *gw, sb apitest.Created, v variant) {
	status := g.sh(t, sb.ID, sb.Token, "cat /proc/self/status")
	field := func(name string) string {
		for line := range strings.SplitSeq(status, "\n") {
			if k, val, ok := strings.Cut(line, ":"); ok && k == name {
				return strings.TrimSpace(val)
			}
		}
		t.Fatalf("/proc/self/status has no %s:\n%s", name, status)
		return ""
	}
	wantCaps := "0000000000000000"
	if v.profile == "workspace" {
		wantCaps = workspaceCapMask
	}
	for _, f := range []string{"CapEff", "CapBnd"} {
		if got := field(f); got != wantCaps {
			t.Errorf("%s = %s, want %s", f, got, wantCaps)
		}
	}
	if got := field("NoNewPrivs"); got != "1" {
		t.Errorf("NoNewPrivs = %s, want 1", got)
	}
	if got := field("Seccomp"); got != "2" {
		t.Errorf("Seccomp = %s, want 2 (filter)", got)
	}
	root := g.sh(t, sb.ID, sb.Token, `if (: > /.sandgate-rootfs-probe) 2>/dev/null; then rm -f /.sandgate-rootfs-probe; echo writable; else echo read-only; fi`)
	if want := map[string]string{"strict": "read-only\n", "workspace": "writable\n"}[v.profile]; root != want {
		t.Errorf("root filesystem: %q, want %q", root, want)
	}
	mounts := g.sh(t, sb.ID, sb.Token, "cat /proc/mounts")
	for target, size := range map[string]string{"/workspace": "size=262144k", "/tmp": "size=65536k"} {
		line := mountLine(mounts, target)
		if !strings.HasPrefix(line, "tmpfs ") || !strings.Contains(line, size) || !strings.Contains(line, " rw") {
			t.Errorf("%s: %q, want a rw tmpfs with %s", target, line, size)
		}
	}
	// A write past each cap fails; the same write below it succeeds.
	for target, capMiB := range map[string]int{"/tmp": 64, "/workspace": 256} {
		res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"sh", "-c",
			fmt.Sprintf("dd if=/dev/zero of=%s/fill bs=1048576 count=%d 2>&1; rc=$?; rm -f %s/fill; exit $rc", target, capMiB+8, target)}, "timeout_seconds": 60})
		if res.code() == 0 || !strings.Contains(strings.ToLower(res.Stdout), "no space") {
			t.Errorf("writing %d MiB to %s (cap %d MiB): exit %d, %q", capMiB+8, target, capMiB, res.code(), res.Stdout)
		}
	}
	if res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1048576 count=8 2>/dev/null; rc=$?; rm -f /tmp/fill; exit $rc"}}); res.code() != 0 {
		t.Errorf("8 MiB to /tmp: exit %d %q", res.code(), res.Stderr)
	}
	ifaces := g.sh(t, sb.ID, sb.Token, "ls /sys/class/net")
	if strings.Fields(ifaces)[0] != "lo" || len(strings.Fields(ifaces)) != 1 {
		t.Errorf("network interfaces: %q, want only lo", ifaces)
	}
	limits := g.sh(t, sb.ID, sb.Token, "cat /proc/self/limits")
	for name, want := range map[string]string{"Max open files": "1024 1024", "Max processes": "512 512"} {
		line := ""
		for l := range strings.SplitSeq(limits, "\n") {
			if strings.HasPrefix(l, name) {
				line = strings.Join(strings.Fields(strings.TrimPrefix(l, name)), " ")
			}
		}
		if !strings.HasPrefix(line, want) {
			t.Errorf("%s: %q, want %s", name, line, want)
		}
	}
	if init := g.sh(t, sb.ID, sb.Token, "tr '\\0' ' ' < /proc/1/cmdline"); !strings.HasPrefix(init, "/sbin/docker-init") {
		t.Errorf("pid 1 is %q, want docker's init", init)
	}
	// The pids limit holds: a bounded fork loop in a subshell stops well
	// short of 400 children when a fork fails (which ends the subshell);
	// then the outer shell kills its whole process group, children
	// included, with builtins only (nothing is left to fork with).
	res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"sh", "-c",
		`rm -f /tmp/forks; (n=0; while [ $n -lt 400 ]; do sleep 120 & n=$((n+1)); echo $n > /tmp/forks; done); kill -KILL 0`}, "timeout_seconds": 60})
	forks := strings.TrimSpace(g.sh(t, sb.ID, sb.Token, `cat /tmp/forks; rm -f /tmp/forks`))
	if n, err := strconv.Atoi(forks); err != nil || n >= 256 || n < 100 || res.code() != 137 {
		t.Errorf("fork loop: %q children before the pids limit stopped it (exit %d, %q); want fewer than 256, then 137", forks, res.code(), res.Stderr)
	}
	// The node is still usable after the fork test.
	if out := g.sh(t, sb.ID, sb.Token, "echo alive"); out != "alive\n" {
		t.Errorf("after the fork test: %q", out)
	}
}

func mountLine(mounts, target string) string {
	for line := range strings.SplitSeq(mounts, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == target {
			return line
		}
	}
	return ""
}

func hardeningOnHost(t *testing.T, g *gw, sb apitest.Created, v variant) {
	c := inspectSandbox(t, sb.ID)
	h := c.HostConfig
	if h.Privileged {
		t.Error("privileged")
	}
	if !slices.Equal(lower(h.CapDrop), []string{"all"}) {
		t.Errorf("CapDrop %v, want [ALL]", h.CapDrop)
	}
	wantAdd := []string(nil)
	if v.profile == "workspace" {
		wantAdd = []string{"chown", "dac_override", "fowner", "fsetid", "kill", "setfcap", "setgid", "setuid"}
	}
	if got := lower(h.CapAdd); !slices.Equal(sorted(got), wantAdd) {
		t.Errorf("CapAdd %v, want %v", h.CapAdd, wantAdd)
	}
	if !slices.Contains(h.SecurityOpt, "no-new-privileges") {
		t.Errorf("SecurityOpt %v lacks no-new-privileges", h.SecurityOpt)
	}
	for _, o := range h.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			t.Errorf("SecurityOpt %v weakens confinement", h.SecurityOpt)
		}
	}
	if h.ReadonlyRootfs != (v.profile == "strict") {
		t.Errorf("ReadonlyRootfs %v on %s", h.ReadonlyRootfs, v.profile)
	}
	if h.Memory != 512<<20 || h.MemorySwap != h.Memory {
		t.Errorf("Memory %d, MemorySwap %d: want both %d (no swap)", h.Memory, h.MemorySwap, 512<<20)
	}
	if h.PidsLimit == nil || *h.PidsLimit != 256 {
		t.Errorf("PidsLimit %v, want 256", h.PidsLimit)
	}
	if h.Init == nil || !*h.Init {
		t.Errorf("Init %v, want true", h.Init)
	}
	if h.IpcMode != "private" {
		t.Errorf("IpcMode %q, want private", h.IpcMode)
	}
	if h.Runtime != "runc" {
		t.Errorf("Runtime %q, want runc", h.Runtime)
	}
	if h.NetworkMode != "none" {
		t.Errorf("NetworkMode %q, want none", h.NetworkMode)
	}
	if len(h.Devices) != 0 || h.PidMode != "" || h.UsernsMode != "" {
		t.Errorf("devices %v, pid mode %q, userns mode %q: want none", h.Devices, h.PidMode, h.UsernsMode)
	}
	ul := map[string]string{}
	for _, u := range h.Ulimits {
		ul[u.Name] = fmt.Sprintf("%d:%d", u.Soft, u.Hard)
	}
	if ul["nofile"] != "1024:1024" || ul["nproc"] != "512:512" || len(ul) != 2 {
		t.Errorf("Ulimits %v, want nofile 1024:1024 and nproc 512:512", ul)
	}
	if c.Config.Labels["sandgate.sandbox_id"] != sb.ID {
		t.Errorf("label sandgate.sandbox_id = %q", c.Config.Labels["sandgate.sandbox_id"])
	}
	// No mounts beyond the job's two tmpfs work areas and the three task
	// directories Nomad itself binds (D3: bounded by the disk quota).
	tmpfs := map[string]int64{}
	for _, m := range h.Mounts {
		if m.Type != "tmpfs" || m.ReadOnly || m.TmpfsOptions == nil {
			t.Errorf("job mount %+v: want writable tmpfs with a size", m)
			continue
		}
		tmpfs[m.Target] = m.TmpfsOptions.SizeBytes
	}
	if tmpfs["/workspace"] != 256<<20 || tmpfs["/tmp"] != 64<<20 || len(tmpfs) != 2 {
		t.Errorf("tmpfs mounts %v, want /workspace 256 MiB and /tmp 64 MiB", tmpfs)
	}
	var binds []string
	for _, m := range c.Mounts {
		if m.Type == "tmpfs" {
			continue
		}
		if m.Type != "bind" {
			t.Errorf("mount of type %s at %s", m.Type, m.Destination)
		}
		binds = append(binds, m.Destination)
	}
	if slices.Sort(binds); !slices.Equal(binds, []string{"/alloc", "/local", "/secrets"}) {
		t.Errorf("bind mounts %v, want only Nomad's task dirs /alloc /local /secrets", binds)
	}
}

func execSemantics(t *testing.T, g *gw, sb apitest.Created) {
	run := func(body map[string]any) execResult { return g.exec(t, sb.ID, sb.Token, body) }
	for _, c := range []struct {
		argv []string
		code int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"no-such-command-e2e"}, 127},
	} {
		if res := run(map[string]any{"argv": c.argv}); res.code() != c.code || res.TimedOut {
			t.Errorf("%v: exit %d (timed out %v), want %d; stderr %q", c.argv, res.code(), res.TimedOut, c.code, res.Stderr)
		}
	}
	if res := run(map[string]any{"argv": []string{"cat"}, "stdin": "line one\nline two\n"}); res.Stdout != "line one\nline two\n" || res.code() != 0 {
		t.Errorf("stdin: %+v", res)
	}
	res := run(map[string]any{"argv": []string{"sh", "-c", `echo "$GREETING|$OTHER"; pwd`},
		"env": map[string]string{"GREETING": "hello world", "OTHER": "a'b\"c$d"}, "workdir": "/workspace"})
	if res.Stdout != "hello world|a'b\"c$d\n/workspace\n" || res.code() != 0 {
		t.Errorf("env and workdir: %+v", res)
	}
	if res := run(map[string]any{"argv": []string{"pwd"}, "workdir": "/workspace/no/such/dir"}); res.code() != 125 || !strings.Contains(res.Stderr, "/workspace/no/such/dir") {
		t.Errorf("a workdir that does not exist: %+v", res)
	}
	// The caller's PATH applies to the command only, never to the wrapper.
	if res := run(map[string]any{"argv": []string{"/bin/sh", "-c", "echo $PATH"}, "env": map[string]string{"PATH": "/workspace"}}); res.Stdout != "/workspace\n" || res.code() != 0 {
		t.Errorf("PATH for the command: %+v", res)
	}
	// Nothing the caller sends changes how the wrapper runs (E1): tools an
	// earlier exec planted under the caller's PATH and workdir, named like
	// everything the wrapper itself calls, are the command's business only.
	callersPATHCannotReplaceTheWrapper(t, g, sb, run)
	// Output caps: 64 KiB kept per stream, the totals counted.
	res = run(map[string]any{"argv": []string{"sh", "-c", "dd if=/dev/zero bs=1024 count=100 2>/dev/null | tr '\\0' a; dd if=/dev/zero bs=1024 count=70 2>/dev/null | tr '\\0' b >&2"}})
	if !res.StdoutTruncated || !res.StderrTruncated || !res.Truncated || len(res.Stdout) != 65536 || res.StdoutBytes != 100*1024 || res.StderrBytes != 70*1024 {
		t.Errorf("output caps: stdout %d bytes kept of %d (truncated %v), stderr kept %d of %d (truncated %v)",
			len(res.Stdout), res.StdoutBytes, res.StdoutTruncated, len(res.Stderr), res.StderrBytes, res.StderrTruncated)
	}
	// A command that exits 124 by itself did not time out.
	if res := run(map[string]any{"argv": []string{"sh", "-c", "exit 124"}, "timeout_seconds": 10}); res.code() != 124 || res.TimedOut {
		t.Errorf("exit 124 by itself: %+v", res)
	}
	// A timeout stops the command's whole tree, background children and
	// children that ignore SIGTERM included.
	start := time.Now()
	res = run(map[string]any{"argv": []string{"sh", "-c", `yes > /dev/null & (trap "" TERM; exec sleep 300) & sleep 30`}, "timeout_seconds": 2})
	if !res.TimedOut || time.Since(start) > 20*time.Second {
		t.Errorf("timeout: %+v after %s", res, time.Since(start))
	}
	left := g.sh(t, sb.ID, sb.Token, `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in yes*|"sleep 300"*|"sleep 30"*) echo "${p#/proc/} $c";; esac; done`)
	if strings.TrimSpace(left) != "" {
		t.Errorf("processes of the timed-out command still run:\n%s", left)
	}
}

func callersPATHCannotReplaceTheWrapper(t *testing.T, g *gw, sb apitest.Created, run func(map[string]any) execResult) {
	// A directory the caller can write and execute from: /workspace, or in
	// the workspace profile any writable place on the root filesystem.
	dir := strings.TrimSpace(g.sh(t, sb.ID, sb.Token, `for d in /workspace/bin /var/tmp/bin /root/bin; do
	mkdir -p "$d" 2>/dev/null || continue
	printf '#!/bin/sh\necho planted\n' > "$d/probe" 2>/dev/null && chmod +x "$d/probe" && [ "$("$d/probe" 2>/dev/null)" = planted ] && { echo "$d"; break; }
done`))
	if dir == "" {
		if sb.Body["profile"] == "workspace" {
			t.Fatal("the workspace profile offers no writable directory to execute from: the PATH check proves nothing")
		}
		t.Log("strict profile: no writable directory can execute a planted tool (noexec tmpfs, read-only root); nothing to replace the wrapper with")
		return
	}
	// Fakes of every tool the wrapper (and the old timeout wrapper) looks up
	// (the planted probe shows the command does see the caller's PATH):
	// each exits at once, so a wrapper that used one would fire its
	// watchdog at once (sleep), never start the command (setsid), or never
	// signal it (kill, timeout).
	g.sh(t, sb.ID, sb.Token, `for f in sleep setsid kill timeout sh env; do printf '#!/bin/sh\nexit 0\n' > "`+dir+`/$f"; chmod +x "`+dir+`/$f"; done`)
	path := map[string]string{"PATH": dir + ":/usr/bin:/bin"}
	// The workdir is the planted directory where E1 allows it (under
	// exec.workdir_roots: /workspace, /tmp); /var/tmp/bin or /root/bin is
	// refused as a workdir, so the command starts in /workspace there.
	workdir := dir
	if !strings.HasPrefix(dir, "/workspace/") && !strings.HasPrefix(dir, "/tmp/") {
		workdir = "/workspace"
	}
	res := run(map[string]any{"argv": []string{"/bin/sh", "-c", `echo start; /bin/sleep 2; echo done; probe`}, "env": path, "workdir": workdir, "timeout_seconds": 20})
	if res.code() != 0 || res.TimedOut || res.Stdout != "start\ndone\nplanted\n" {
		t.Errorf("a command under a PATH of planted tools: %+v", res)
	}
	start := time.Now()
	res = run(map[string]any{"argv": []string{"/bin/sleep", "30"}, "env": path, "workdir": workdir, "timeout_seconds": 2})
	if !res.TimedOut || time.Since(start) > 20*time.Second {
		t.Errorf("the timeout under a PATH of planted tools: %+v after %s", res, time.Since(start))
	}
	if left := g.sh(t, sb.ID, sb.Token, `for p in /proc/[0-9]*; do case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "/bin/sleep 30"*) echo "${p#/proc/}";; esac; done`); strings.TrimSpace(left) != "" {
		t.Errorf("the timed-out command still runs under a planted PATH: %s", left)
	}
	g.sh(t, sb.ID, sb.Token, "rm -rf "+dir)
}

func destroy(t *testing.T, g *gw, sb apitest.Created) {
	jobID := "sandgate-sbx-" + sb.ID
	if _, _, err := g.nomad.Jobs().Info(jobID, nil); err != nil {
		t.Fatalf("the job before destroy: %v", err)
	}
	if r := g.api(t).Do(http.MethodDelete, "/v1/sandboxes/"+sb.ID, sb.Token, nil); r.Status != http.StatusNoContent {
		t.Fatalf("destroy with the session token: %s", r)
	}
	apitest.ExpectProblem(t, g.api(t).Do(http.MethodGet, "/v1/sandboxes/"+sb.ID, sb.Token, nil), http.StatusUnauthorized, "unauthenticated")
	apitest.ExpectProblem(t, g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", sb.Token, map[string]any{"argv": []string{"true"}}), http.StatusUnauthorized, "unauthenticated")
	if m := g.status(t, sb.ID); m["state"] != "ended" {
		t.Fatalf("after destroy: %v", m)
	}
	// destroy purges: the job is gone from Nomad, and so is the container.
	if _, _, err := g.nomad.Jobs().Info(jobID, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("the job after destroy: %v, want 404 (purged)", err)
	}
	eventually(t, 30*time.Second, "the sandbox's container removed", func() bool { return containersOf(sb.ID) == 0 })
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func lower(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "CAP_"))
	}
	return out
}

func sorted(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	slices.Sort(l)
	return l
}
