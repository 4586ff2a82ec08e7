package nomadsim

import (
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// fsNames lists one level of an allocation directory through nomad/api and
// returns "name mode isdir size" per entry.
func fsNames(t *testing.T, c *api.Client, alloc *api.Allocation, p string) []string {
	t.Helper()
	files, _, err := c.AllocFS().List(alloc, p, nil)
	if err != nil {
		t.Fatalf("ls %s: %v", p, err)
	}
	out := make([]string, 0, len(files))
	for _, f := range files {
		d := "file"
		if f.IsDir {
			d = "dir"
		}
		out = append(out, strings.Join([]string{f.Name, f.FileMode, d, itoa(int(f.Size))}, " "))
	}
	return out
}

func TestFSListShowsTheTaskDirectorySkeletonOfARealClient(t *testing.T) {
	t.Parallel()
	_, _, c, alloc := execCluster(t)
	cases := map[string][]string{
		"/":      {"alloc drwxrwxrwx dir 4096", "main drwxrwxrwx dir 4096"},
		"":       {"alloc drwxrwxrwx dir 4096", "main drwxrwxrwx dir 4096"},
		"/alloc": {"data drwxrwxrwx dir 4096", "logs drwxrwxrwx dir 4096", "tmp drwxrwxrwx dir 4096"},
		"alloc/logs": {
			".main.stderr.fifo prw------- file 0", ".main.stdout.fifo prw------- file 0",
			"main.stderr.0 -rw-r--r-- file 0", "main.stdout.0 -rw-r--r-- file " + itoa(len(taskStartedLine)),
		},
		"/main":         {"local drwxrwxrwx dir 4096", "private drwxrwxrwx dir 60", "secrets drwxrwxrwx dir 60", "tmp dtrwxrwxrwx dir 4096"},
		"/main/secrets": {".nomad-mount -rw-r--r-- file 0"},
		"/main/local":   {},
		"/alloc/data":   {},
	}
	for p, want := range cases {
		if got := fsNames(t, c, alloc, p); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("ls %q:\n got %q\nwant %q", p, got, want)
		}
	}
}

func TestFSListAnswersWithTheRealAgentsJSONAndHeaders(t *testing.T) {
	t.Parallel()
	s, url, _, alloc := execCluster(t)
	must(t, s.WriteTaskFile(alloc.ID, "main/local/big", 100<<20))
	r := do(t, http.MethodGet, url+"/v1/client/fs/ls/"+alloc.ID+"?path=/main/local", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q", r.status, r.header.Get("Content-Type"))
	}
	for _, h := range []string{"X-Nomad-Index", "X-Nomad-KnownLeader", "X-Nomad-LastContact"} {
		if r.header.Get(h) != "" {
			t.Errorf("a client endpoint answered %s (the agent sends none)", h)
		}
	}
	var got []map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil || len(got) != 1 {
		t.Fatalf("body %s: %v", r.body, err)
	}
	// As the agent encodes cstructs.AllocFileInfo for a listing: no ContentType.
	if keys := slices.Sorted(maps.Keys(got[0])); strings.Join(keys, ",") != "FileMode,IsDir,ModTime,Name,Size" {
		t.Errorf("fields %v", keys)
	}
	if !strings.HasPrefix(string(r.body), `[{"FileMode":"-rw-r--r--","IsDir":false,"ModTime":"`) ||
		!strings.HasSuffix(string(r.body), `","Name":"big","Size":104857600}]`) {
		t.Errorf("body %s", r.body)
	}
}

func TestFSListErrorsAreTheAgents(t *testing.T) {
	t.Parallel()
	s, url, _, alloc := execCluster(t)
	must(t, s.PutTaskFile(alloc.ID, "main/local/ln", fs.ModeSymlink|0o777, 11))
	must(t, s.WriteTaskFile(alloc.ID, "main/local/f", 3))
	host := simHostAllocDir + "/" + alloc.ID
	cases := []struct {
		path   string
		status int
		body   string
	}{
		{"/v1/client/fs/ls/00000000-1111-2222-3333-444444444444?path=/", 404, `Unknown allocation "00000000-1111-2222-3333-444444444444"`},
		{"/v1/client/fs/ls/" + alloc.ID[:8] + "?path=/", 500, errBadUUID},
		{"/v1/client/fs/ls/" + alloc.ID + "?path=/main/local/nope", 404, "open " + host + "/main/local/nope: no such file or directory"},
		{"/v1/client/fs/ls/" + alloc.ID + "?path=/main/local/ln", 500, "open " + host + "/main/local/ln: not a directory"},
		{"/v1/client/fs/ls/" + alloc.ID + "?path=/main/local/f", 500, "open " + host + "/main/local/f: not a directory"},
		{"/v1/client/fs/ls/" + alloc.ID + "?path=/main/../..", 500, errPathEscapes},
	}
	for _, tc := range cases {
		r := do(t, http.MethodGet, url+tc.path, nil)
		if r.status != tc.status || string(r.body) != tc.body {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, r.status, r.body, tc.status, tc.body)
		}
	}
	if r := do(t, http.MethodPut, url+"/v1/client/fs/ls/"+alloc.ID, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", r.status)
	}
}

func TestTaskFilesAppearInTheListingWithTheirKind(t *testing.T) {
	t.Parallel()
	s, _, c, alloc := execCluster(t)
	must(t, s.WriteTaskFile(alloc.ID, "main/local/d/e/f", 3072))
	must(t, s.PutTaskFile(alloc.ID, "main/local/ff", fs.ModeNamedPipe|0o644, 0))
	must(t, s.PutTaskFile(alloc.ID, "main/local/ln", fs.ModeSymlink|0o777, 11))
	must(t, s.PutTaskFile(alloc.ID, "alloc/data/sock", fs.ModeSocket|0o755, 0))
	want := []string{"d drwxr-xr-x dir 4096", "ff prw-r--r-- file 0", "ln Lrwxrwxrwx file 11"}
	if got := fsNames(t, c, alloc, "/main/local"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ls /main/local: %q, want %q", got, want)
	}
	if got := fsNames(t, c, alloc, "/main/local/d/e"); len(got) != 1 || got[0] != "f -rw-r--r-- file 3072" {
		t.Errorf("ls /main/local/d/e: %q", got)
	}
	if got := fsNames(t, c, alloc, "/alloc/data"); len(got) != 1 || got[0] != "sock Srwxr-xr-x file 0" {
		t.Errorf("ls /alloc/data: %q", got)
	}
	must(t, s.RemoveTaskFile(alloc.ID, "main/local/d"))
	if got := fsNames(t, c, alloc, "/main/local"); len(got) != 2 {
		t.Errorf("after removing d: %q", got)
	}
	for _, bad := range []struct {
		path string
		size int64
	}{{"../x", 1}, {"/", 1}, {"main/local/ff/x", 1}, {"main/local/x", -1}} {
		if err := s.WriteTaskFile(alloc.ID, bad.path, bad.size); err == nil {
			t.Errorf("WriteTaskFile(%q, %d) succeeded", bad.path, bad.size)
		}
	}
	if err := s.WriteTaskFile("00000000-1111-2222-3333-444444444444", "main/local/x", 1); err == nil {
		t.Error("WriteTaskFile on an unknown allocation succeeded")
	}
}
