package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The listings of an idle docker sandbox, as a real v1.6.5 client answered
// them (test/e2e/diskquota_test.go checks the agent still does).
const (
	lsDir    = `{"FileMode":"drwxrwxrwx","IsDir":true,"ModTime":"2026-12-01T15:58:08.323713179Z","Name":%q,"Size":4096}`
	lsFile   = `{"FileMode":"-rw-r--r--","IsDir":false,"ModTime":"2026-12-01T15:58:08.370355147Z","Name":%q,"Size":%d}`
	lsFIFO   = `{"FileMode":"prw-------","IsDir":false,"ModTime":"2026-12-01T15:58:08.370355147Z","Name":%q,"Size":0}`
	lsSymlnk = `{"FileMode":"Lrwxrwxrwx","IsDir":false,"ModTime":"2026-12-01T15:58:09.806355214Z","Name":%q,"Size":11}`
)

func ls(entries ...string) string { return "[" + strings.Join(entries, ",") + "]" }

// idleTree is the alloc directory of an idle sandbox whose task is "main".
func idleTree() map[string]string {
	return map[string]string{
		"/alloc":      ls(fmt.Sprintf(lsDir, "data"), fmt.Sprintf(lsDir, "logs"), fmt.Sprintf(lsDir, "tmp")),
		"/alloc/data": "[]",
		"/alloc/logs": ls(fmt.Sprintf(lsFIFO, ".main.stderr.fifo"), fmt.Sprintf(lsFIFO, ".main.stdout.fifo"),
			fmt.Sprintf(lsFile, "main.stderr.0", 0), fmt.Sprintf(lsFile, "main.stdout.0", 10)),
		"/alloc/tmp":  "[]",
		"/main/local": "[]",
	}
}

// treeReplay serves the recorded running allocation and fs/ls from tree
// (path -> JSON answer; a missing path is the agent's 404).
func treeReplay(t *testing.T, tree map[string]string) *replay {
	t.Helper()
	r := newReplay(t)
	r.serve("rawexec-allocation")
	r.handle(http.MethodGet, "/v1/client/fs/ls/"+recAllocID, func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Query().Get("path")
		body, ok := tree[p]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, "open /var/nomad/alloc/%s%s: no such file or directory", recAllocID, p) //nolint:gosec // G705: a test double's plain-text error, as the agent words it
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	return r
}

func listedPaths(r *replay) []string {
	var out []string
	for _, s := range r.requests() {
		if strings.HasPrefix(s.Path, "/v1/client/fs/ls/") {
			out = append(out, s.Query.Get("path"))
		}
	}
	return out
}

func TestTaskDirUsageOfAnIdleSandboxCostsSixCalls(t *testing.T) {
	t.Parallel()
	r := treeReplay(t, idleTree())
	u, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// 7 entries of 4 KiB each, plus the 10 bytes of stdout.
	want := TaskDirUsage{Bytes: 7*4096 + 10, Entries: 7, Listings: 5, Complete: true}
	if u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
	if got := len(r.requests()); got != 6 {
		t.Fatalf("%d requests, want 6 (the allocation, five listings): %v", got, r.requests())
	}
	if got := strings.Join(listedPaths(r), " "); got != "/alloc /main/local /alloc/data /alloc/logs /alloc/tmp" {
		t.Fatalf("listed %s", got)
	}
}

func TestTaskDirUsageCountsFilesAndNeverFollowsWhatIsNotADirectory(t *testing.T) {
	t.Parallel()
	tree := idleTree()
	tree["/main/local"] = ls(fmt.Sprintf(lsDir, "d"), fmt.Sprintf(lsFIFO, "ff"), fmt.Sprintf(lsSymlnk, "ln"),
		`{"FileMode":"Srwxr-xr-x","IsDir":false,"ModTime":"2026-12-01T15:58:09Z","Name":"sock","Size":0}`,
		`{"FileMode":"Dcrw-rw-rw-","IsDir":false,"ModTime":"2026-12-01T15:58:09Z","Name":"null","Size":0}`,
		fmt.Sprintf(lsFile, "sparse..file", 100<<20))
	tree["/main/local/d"] = ls(fmt.Sprintf(lsFile, "f", 3072))
	r := treeReplay(t, tree)
	u, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{EntryBytes: 1})
	if err != nil || !u.Complete {
		t.Fatalf("usage %+v, %v", u, err)
	}
	// 14 entries of 1 byte, stdout, the sparse file in full and d/f; the
	// symlink's 11 bytes are its target's name, not data.
	if want := int64(14 + 10 + 100<<20 + 3072); u.Bytes != want {
		t.Fatalf("bytes %d, want %d", u.Bytes, want)
	}
	for _, p := range listedPaths(r) {
		if strings.HasPrefix(p, "/main/local/") && p != "/main/local/d" {
			t.Errorf("listed %s: only directories are listed", p)
		}
	}
}

func TestTaskDirUsageStopsAtEachBoundWithTheUsageSoFar(t *testing.T) {
	t.Parallel()
	deep := idleTree()
	p := "/main/local"
	for i := range 5 {
		name := fmt.Sprintf("d%d", i)
		deep[p] = ls(fmt.Sprintf(lsDir, name))
		p += "/" + name
	}
	deep[p] = "[]"
	wide := idleTree()
	var files []string
	for i := range 50 {
		files = append(files, fmt.Sprintf(lsFile, fmt.Sprintf("f%d", i), 1))
	}
	wide["/main/local"] = ls(files...)
	cases := []struct {
		name string
		tree map[string]string
		lim  WalkLimits
		why  string
	}{
		{"too many listings", idleTree(), WalkLimits{MaxListings: 3}, "more than 3 directories"},
		{"too many entries", wide, WalkLimits{MaxEntries: 20}, "more than 20 entries"},
		{"too deep", deep, WalkLimits{MaxDepth: 3}, "directories nested deeper than 3"},
		{"a listing too large", wide, WalkLimits{MaxListingBytes: 1000}, `listing "/main/local" is larger than 1000 bytes`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := treeReplay(t, c.tree)
			u, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, c.lim)
			if err != nil {
				t.Fatal(err)
			}
			if u.Complete || u.Incomplete != c.why || u.Bytes <= 0 {
				t.Fatalf("usage %+v, want incomplete %q with the bytes so far", u, c.why)
			}
		})
	}
	r := treeReplay(t, deep)
	if u, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{MaxDepth: 5}); err != nil || !u.Complete {
		t.Fatalf("a tree exactly as deep as the bound: %+v, %v", u, err)
	}
}

func TestTaskDirUsageRefusesUnsafeOrMalformedListings(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"a name with a slash":          fmt.Sprintf(lsFile, "a/b", 1),
		"a name with NUL":              fmt.Sprintf(lsFile, "a\x00b", 1),
		"dot dot":                      fmt.Sprintf(lsDir, ".."),
		"a directory holding dots":     fmt.Sprintf(lsDir, "a..b"),
		"an empty name":                fmt.Sprintf(lsFile, "", 1),
		"a negative size":              fmt.Sprintf(lsFile, "f", -1),
		"IsDir with a symlink mode":    `{"FileMode":"Lrwxrwxrwx","IsDir":true,"ModTime":"2026-12-01T15:58:09Z","Name":"x","Size":11}`,
		"an answer that is not a list": `{"Name":"x"}`,
	}
	for name, entry := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tree := idleTree()
			tree["/main/local"] = "[" + entry + "]"
			if name == "an answer that is not a list" {
				tree["/main/local"] = entry
			}
			r := treeReplay(t, tree)
			u, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{})
			if err != nil || u.Complete || u.Incomplete == "" {
				t.Fatalf("usage %+v, %v; want an incomplete walk", u, err)
			}
			for _, p := range listedPaths(r) {
				if strings.Contains(p, "..") || strings.Contains(p, "\x00") {
					t.Fatalf("listed the unsafe path %q", p)
				}
			}
		})
	}
}

func TestTaskDirUsageOfATreeChangingUnderTheWalkIsIncomplete(t *testing.T) {
	t.Parallel()
	tree := idleTree()
	tree["/main/local"] = ls(fmt.Sprintf(lsDir, "gone")) // listed, then 404: it vanished
	r := treeReplay(t, tree)
	u, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{})
	if err != nil || u.Complete || !strings.Contains(u.Incomplete, `listing "/main/local/gone" failed`) {
		t.Fatalf("usage %+v, %v", u, err)
	}
	if n := len(r.requests()); n != 2+len(listedPaths(r)) {
		t.Fatalf("the allocation was not read again after the failed listing: %d requests", n)
	}
}

func TestTaskDirUsageOfARootThatCannotBeListedIsAnError(t *testing.T) {
	t.Parallel()
	tree := idleTree()
	delete(tree, "/main/local") // 404, as for a client the server cannot reach
	r := treeReplay(t, tree)
	_, err := r.client().TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
}

func TestTaskDirUsageOfASlowListingIsIncomplete(t *testing.T) {
	t.Parallel()
	r := treeReplay(t, idleTree())
	var slow atomic.Bool
	slow.Store(true)
	r.handle(http.MethodGet, "/v1/client/fs/ls/"+recAllocID, func(w http.ResponseWriter, req *http.Request) {
		if p := req.URL.Query().Get("path"); p == "/main/local" && slow.Load() {
			select {
			case <-req.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(idleTree()[req.URL.Query().Get("path")]))
	})
	c := r.client(func(c *Config) { c.Timeout = 100 * time.Millisecond })
	u, err := c.TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{})
	if err != nil || u.Complete || !strings.Contains(u.Incomplete, "no answer within 100ms") {
		t.Fatalf("per-call timeout: %+v, %v", u, err)
	}
	u, err = c.TaskDirUsage(context.Background(), recAllocID, recTaskName, WalkLimits{Timeout: 50 * time.Millisecond})
	if err != nil || u.Complete || u.Incomplete != "the walk took longer than 50ms" {
		t.Fatalf("walk timeout: %+v, %v", u, err)
	}
}

func TestTaskDirUsageErrors(t *testing.T) {
	t.Parallel()
	t.Run("an unknown allocation is not found", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		fx := loadFixture(t, "error-allocation-unknown")
		r.handle(http.MethodGet, "/v1/allocation/"+unknownID, func(w http.ResponseWriter, _ *http.Request) { fx.write(w) })
		_, err := r.client().TaskDirUsage(context.Background(), unknownID, "main", WalkLimits{})
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a job outside the prefix is refused before any listing", func(t *testing.T) {
		t.Parallel()
		r := treeReplay(t, idleTree())
		_, err := r.client(func(c *Config) { c.JobPrefix = "sandgate-sbx-" }).TaskDirUsage(context.Background(), recAllocID, "main", WalkLimits{})
		if !errors.Is(err, ErrForbiddenJob) || len(listedPaths(r)) != 0 {
			t.Fatalf("err %v, listed %v", err, listedPaths(r))
		}
	})
	t.Run("a task the allocation does not run is refused", func(t *testing.T) {
		t.Parallel()
		r := treeReplay(t, idleTree())
		_, err := r.client().TaskDirUsage(context.Background(), recAllocID, "other", WalkLimits{})
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, `no task "other"`) || len(listedPaths(r)) != 0 {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a stopped allocation is an error, not an incomplete walk", func(t *testing.T) {
		t.Parallel()
		r := treeReplay(t, idleTree())
		var alloc map[string]any
		if err := json.Unmarshal(loadFixture(t, "rawexec-allocation").body(), &alloc); err != nil {
			t.Fatal(err)
		}
		alloc["ClientStatus"] = "complete"
		r.handle(http.MethodGet, "/v1/allocation/"+recAllocID, func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(alloc)
		})
		if _, err := r.client().TaskDirUsage(context.Background(), recAllocID, "main", WalkLimits{}); err == nil || !strings.Contains(err.Error(), "is complete, not running") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("an unreachable Nomad is unavailable", func(t *testing.T) {
		t.Parallel()
		r := treeReplay(t, idleTree())
		r.handle(http.MethodGet, "/v1/client/fs/ls/"+recAllocID, hijackAndClose)
		_, err := r.client().TaskDirUsage(context.Background(), recAllocID, "main", WalkLimits{})
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a 503 is Nomad's, not the tree's", func(t *testing.T) {
		t.Parallel()
		r := treeReplay(t, idleTree())
		r.handle(http.MethodGet, "/v1/client/fs/ls/"+recAllocID, func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		})
		_, err := r.client().TaskDirUsage(context.Background(), recAllocID, "main", WalkLimits{})
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a cancelled context is its error", func(t *testing.T) {
		t.Parallel()
		r := treeReplay(t, idleTree())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.client().TaskDirUsage(ctx, recAllocID, "main", WalkLimits{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unsafe ids and task names send nothing", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		for _, c := range [][2]string{{"../x", "main"}, {recAllocID, "../main"}, {recAllocID, ""}, {recAllocID, "a/b"}} {
			if _, err := r.client().TaskDirUsage(context.Background(), c[0], c[1], WalkLimits{}); err == nil {
				t.Errorf("TaskDirUsage(%q, %q) succeeded", c[0], c[1])
			}
		}
		if n := len(r.requests()); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
}

func TestTaskDirUsageIsObservedOncePerWalk(t *testing.T) {
	t.Parallel()
	r := treeReplay(t, idleTree())
	var ops []string
	c := r.client(func(c *Config) {
		c.Observe = func(op string, _ time.Duration, _ error) { ops = append(ops, op) }
	})
	if _, err := c.TaskDirUsage(context.Background(), recAllocID, "main", WalkLimits{}); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0] != OpTaskDirUsage {
		t.Fatalf("observed %v", ops)
	}
}
