package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/nomad"
)

// Defect D3: Nomad bind-mounts the allocation's alloc/ at /alloc and the
// task's local/ at /local from the client's disk into every docker task,
// read-write, executable and uncapped. The gateway's usage monitor walks
// both from outside and ends a sandbox past the task-directory quota of
// policy data (64 MiB in the embedded bundle, which the e2e data patch
// keeps) with reason disk_quota.

// diskWait is how long after the write the sandbox must be gone: one
// ReclaimInterval (2 s), the walk and the purge, with room for a busy
// machine.
const diskWait = 12 * time.Second

// allocOf returns the allocation of a sandbox's job.
func (g *gw) allocOf(t *testing.T, id string) string {
	t.Helper()
	allocs, _, err := g.nomad.Jobs().Allocations("sandgate-sbx-"+id, false, nil)
	if err != nil || len(allocs) == 0 {
		t.Fatalf("allocations of %s: %v (%d)", id, err, len(allocs))
	}
	return allocs[0].ID
}

func TestDiskQuotaEndsASandboxThatFillsATaskDirectory(t *testing.T) {
	g := startGateway(t, gwOptions{ReclaimInterval: "2s"})
	for _, image := range []string{imageBusybox, imageDebian} {
		for _, dir := range []string{"/local", "/alloc"} {
			name := strings.TrimPrefix(image, "sandgate-e2e/") + dir
			t.Run(name, func(t *testing.T) {
				sb := g.create(t, g.operator, map[string]any{"image": image, "profile": "strict"})
				alloc := g.allocOf(t, sb.ID)
				// Not g.exec: the monitor may end the sandbox while dd still runs.
				start := time.Now()
				r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", sb.Token, map[string]any{
					"argv": []string{"dd", "if=/dev/zero", "of=" + dir + "/fill", "bs=1048576", "count=100"},
				})
				written := time.Now()
				t.Logf("dd of 100 MiB to %s: %s in %s", dir, r, written.Sub(start).Round(time.Millisecond))
				var ended time.Time
				eventually(t, diskWait, "the sandbox ended with end_reason disk_quota", func() bool {
					st := g.status(t, sb.ID)
					if st["state"] == "ended" && st["end_reason"] == "disk_quota" {
						ended = time.Now()
						return true
					}
					return false
				})
				t.Logf("ended for disk_quota %s after the write returned (%s after it started)",
					ended.Sub(written).Round(time.Millisecond), ended.Sub(start).Round(time.Millisecond))
				if slices.Contains(g.jobs(t), "sandgate-sbx-"+sb.ID) {
					t.Fatalf("the job of the ended sandbox is still registered: %v", g.jobs(t))
				}
				// What is left on the client's disk: the allocation directory
				// stays until Nomad garbage-collects the allocation.
				host := filepath.Join(suite.dir, sharedNode, "data", "alloc", alloc)
				if dir == "/local" {
					host = filepath.Join(host, "sandbox", "local", "fill")
				} else {
					host = filepath.Join(host, "alloc", "fill")
				}
				if fi, err := os.Stat(host); err == nil {
					t.Logf("after the end, %s still holds %d bytes until Nomad's client GC", host, fi.Size())
				} else {
					t.Logf("after the end, %s is gone: %v", host, err)
				}
			})
		}
	}
}

func TestDiskQuotaLeavesASandboxUnderItRunning(t *testing.T) {
	g := startGateway(t, gwOptions{ReclaimInterval: "2s"})
	sb := g.create(t, g.operator, map[string]any{"image": imageBusybox})
	g.sh(t, sb.ID, sb.Token, "dd if=/dev/zero of=/local/small bs=1048576 count=1 2>/dev/null")
	time.Sleep(3 * 2 * time.Second) // three monitor passes
	if st := g.status(t, sb.ID); st["state"] != "running" {
		t.Fatalf("a sandbox with 1 MiB in /local was ended: %v", st)
	}
	if !slices.Contains(g.jobs(t), "sandgate-sbx-"+sb.ID) {
		t.Fatal("its job is gone")
	}
}

// What D3 leaves: /secrets is a 1 MiB noexec tmpfs (bounded by the kernel,
// so the walk skips it); /alloc and /local are on the host's disk and
// executable, which no setting of Nomad 1.6.5 changes.
func TestDiskTaskDirectoriesAsTheSandboxSeesThem(t *testing.T) {
	g := startGateway(t, gwOptions{})
	for _, image := range []string{imageBusybox, imageDebian} {
		t.Run(strings.TrimPrefix(image, "sandgate-e2e/"), func(t *testing.T) {
			sb := g.create(t, g.operator, map[string]any{"image": image})
			mounts := g.sh(t, sb.ID, sb.Token, "cat /proc/mounts")
			for _, want := range []struct{ target, fs, opt string }{
				{"/secrets", "tmpfs", "noexec"}, {"/secrets", "tmpfs", "size=1024k"},
			} {
				if !mountHas(mounts, want.target, want.fs, want.opt) {
					t.Errorf("%s is not %s with %s:\n%s", want.target, want.fs, want.opt, mounts)
				}
			}
			for _, target := range []string{"/alloc", "/local"} {
				if mountHas(mounts, target, "tmpfs", "") || mountHas(mounts, target, "", "noexec") {
					t.Errorf("%s is now a tmpfs or noexec: the quota may be relaxed (docs/threat-model.md)", target)
				}
			}
			res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"dd", "if=/dev/zero", "of=/secrets/big", "bs=1048576", "count=2"}})
			if res.code() == 0 {
				t.Errorf("2 MiB fit in /secrets: %+v", res)
			}
			t.Logf("/secrets: %s", strings.TrimSpace(g.sh(t, sb.ID, sb.Token, "ls -la /secrets")))
		})
	}
}

// mountHas reports whether /proc/mounts lists target with file system fs
// (any when empty) and option opt (any when empty).
func mountHas(mounts, target, fs, opt string) bool {
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] != target {
			continue
		}
		if (fs == "" || f[2] == fs) && (opt == "" || slices.Contains(strings.Split(f[3], ","), opt)) {
			return true
		}
	}
	return false
}

// The oracle of the simulator's fs/ls (nomad/nomadsim/fs.go) and of the
// walk's unit tests (nomad/taskdirs_test.go): the real client's listing of
// an idle docker sandbox, its JSON fields, its errors; and what a walk
// costs here.
func TestDiskTaskDirListingOfTheRealAgent(t *testing.T) {
	g := startGateway(t, gwOptions{})
	sb := g.create(t, g.operator, map[string]any{"image": imageBusybox})
	alloc := g.allocOf(t, sb.ID)
	names := func(p string) string {
		files, _, err := g.nomad.AllocFS().List(&api.Allocation{ID: alloc}, p, nil)
		if err != nil {
			t.Fatalf("ls %s: %v", p, err)
		}
		var out []string
		for _, f := range files {
			out = append(out, f.Name+" "+f.FileMode)
		}
		return strings.Join(out, ", ")
	}
	for p, want := range map[string]string{ //nolint:gosec // G101: directory listings, not credentials
		"/":                "alloc drwxrwxrwx, sandbox drwxrwxrwx",
		"/alloc":           "data drwxrwxrwx, logs drwxrwxrwx, tmp drwxrwxrwx",
		"/alloc/logs":      ".sandbox.stderr.fifo prw-------, .sandbox.stdout.fifo prw-------, sandbox.stderr.0 -rw-r--r--, sandbox.stdout.0 -rw-r--r--",
		"/sandbox":         "local drwxrwxrwx, private drwxrwxrwx, secrets drwxrwxrwx, tmp dtrwxrwxrwx",
		"/sandbox/secrets": ".nomad-mount -rw-r--r--",
		"/sandbox/local":   "",
	} {
		if got := names(p); got != want {
			t.Errorf("ls %s: %q, want %q", p, got, want)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(suite.server.HTTPAddr + path) //nolint:gosec,noctx // the agent this suite started
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := get("/v1/client/fs/ls/" + alloc + "?path=/alloc")
	var raw []map[string]any
	if err := json.Unmarshal([]byte(body), &raw); status != 200 || err != nil || len(raw) == 0 {
		t.Fatalf("ls /alloc: %d %s", status, body)
	}
	keys := make([]string, 0, len(raw[0]))
	for k := range raw[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got := strings.Join(keys, ","); got != "FileMode,IsDir,ModTime,Name,Size" {
		t.Errorf("listing fields %s", got)
	}
	if status, body := get("/v1/client/fs/ls/" + alloc + "?path=/sandbox/local/nope"); status != 404 || !strings.HasSuffix(body, "/sandbox/local/nope: no such file or directory") {
		t.Errorf("missing path: %d %s", status, body)
	}
	if status, body := get("/v1/client/fs/ls/00000000-1111-2222-3333-444444444444?path=/"); status != 404 || body != `Unknown allocation "00000000-1111-2222-3333-444444444444"` {
		t.Errorf("unknown allocation: %d %s", status, body)
	}

	c, err := nomad.New(nomad.Config{Address: suite.server.HTTPAddr, Namespace: g.namespace, JobPrefix: "sandgate-sbx-"})
	if err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	const walks = 20
	var u nomad.TaskDirUsage
	for range walks {
		start := time.Now()
		if u, err = c.TaskDirUsage(context.Background(), alloc, "sandbox", nomad.WalkLimits{}); err != nil || !u.Complete {
			t.Fatalf("walk: %+v, %v", u, err)
		}
		total += time.Since(start)
	}
	t.Logf("an idle sandbox's walk: %d listings + 1 allocation read, %d entries, %d bytes, %s on average over %d walks",
		u.Listings, u.Entries, u.Bytes, (total / walks).Round(10*time.Microsecond), walks)
}
