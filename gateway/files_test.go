package gateway_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// putRaw sends a raw body with its Content-Length (net/http sets it for a
// bytes.Reader), as a file PUT takes it.
func (h *harness) putRaw(path, tok string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPut, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func filesPath(id, p string, extra ...string) string {
	q := url.Values{"path": {p}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/v1/sandboxes/" + id + "/files?" + q.Encode()
}

func TestFilesRoundTripOnTheSimulator(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.create(h.operator, nil)
	data := make([]byte, 3<<20) // beyond the 1 MiB JSON body limit
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}

	r := h.putRaw(filesPath(id, "/workspace/sub/dir/blob.bin", "mode", "0600"), session, data)
	if r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	info := r.json(t)
	if info["size"] != float64(len(data)) || info["mode"] != "0600" || info["type"] != "file" || info["path"] != "/workspace/sub/dir/blob.bin" {
		t.Fatalf("put answered %s", r.body)
	}
	for name, want := range map[string]string{
		"X-Sandgate-Max-Write-Bytes": "67108864", "X-Sandgate-Max-Read-Bytes": "67108864",
		"X-Sandgate-Max-List-Entries": "1000", "X-Sandgate-Files-Timeout-Seconds": "300",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	r = h.do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin"), session, nil)
	if r.status != http.StatusOK || !bytes.Equal(r.body, data) {
		t.Fatalf("get: %d, %d bytes, equal %v", r.status, len(r.body), bytes.Equal(r.body, data))
	}
	if r.header.Get("Content-Type") != "application/octet-stream" || r.header.Get("X-Sandgate-File-Mode") != "0600" || r.header.Get("Content-Length") != "3145728" {
		t.Fatalf("get headers: %v", r.header)
	}

	// The simulated builtins see the same filesystem.
	r = h.do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"cat", "/workspace/note"}})
	if m := r.json(t); m["exit_code"] != float64(1) {
		t.Fatalf("cat of a missing file: %s", r.body)
	}
	if r = h.putRaw(filesPath(id, "/workspace/note"), session, []byte("hello\n")); r.status != http.StatusOK {
		t.Fatalf("put note: %d %s", r.status, r.body)
	}
	r = h.do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"cat", "/workspace/note"}})
	if m := r.json(t); m["stdout"] != "hello\n" {
		t.Fatalf("cat of the written file: %s", r.body)
	}

	// A listing.
	r = h.do(http.MethodGet, filesPath(id, "/workspace"), session, nil)
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	var l struct {
		Path    string `json:"path"`
		Entries []struct {
			Name, Type, Mode string
			Size             int64
		} `json:"entries"`
		Truncated bool `json:"truncated"`
		Total     int  `json:"total"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	if l.Total != 2 || l.Truncated || len(l.Entries) != 2 || l.Entries[0].Name != "note" || l.Entries[0].Type != "file" || l.Entries[0].Size != 6 || l.Entries[1].Name != "sub" || l.Entries[1].Type != "dir" {
		t.Fatalf("listing %s", r.body)
	}

	// Delete: a non-empty directory needs recursive=true.
	expectProblem(t, h.do(http.MethodDelete, filesPath(id, "/workspace/sub"), session, nil), http.StatusConflict, "directory_not_empty")
	if r = h.do(http.MethodDelete, filesPath(id, "/workspace/sub", "recursive", "true"), session, nil); r.status != http.StatusNoContent {
		t.Fatalf("recursive delete: %d %s", r.status, r.body)
	}
	expectProblem(t, h.do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin"), session, nil), http.StatusNotFound, "file_not_found")
}

func TestFilesAreConfinedByThePolicyAndTheScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.create(h.operator, nil)
	otherID, _ := h.create(h.operator, nil)

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/etc/passwd"}, {http.MethodGet, "/workspace/../etc/passwd"}, {http.MethodGet, "workspace/x"},
		{http.MethodPut, "/workspace"}, {http.MethodDelete, "/tmp"}, {http.MethodGet, "/workspacefoo"},
	} {
		var r response
		if c.method == http.MethodPut {
			r = h.putRaw(filesPath(id, c.path), session, []byte("x"))
		} else {
			r = h.do(c.method, filesPath(id, c.path), session, nil)
		}
		expectProblem(t, r, http.StatusForbidden, "policy_denied", "F1")
	}
	expectProblem(t, h.do(http.MethodGet, "/v1/sandboxes/"+id+"/files", session, nil), http.StatusForbidden, "policy_denied", "F1")
	// A session token reaches its own sandbox only.
	expectProblem(t, h.do(http.MethodGet, filesPath(otherID, "/workspace"), session, nil), http.StatusForbidden, "policy_denied", "T2")

	// Mode bits beyond 0777, and a mode that is not octal.
	expectProblem(t, h.putRaw(filesPath(id, "/workspace/x", "mode", "4755"), session, []byte("x")), http.StatusForbidden, "policy_denied", "F2")
	p := expectProblem(t, h.putRaw(filesPath(id, "/workspace/x", "mode", "rwx"), session, []byte("x")), http.StatusBadRequest, "invalid_request")
	if p["field"] != "mode" {
		t.Fatalf("field %v", p["field"])
	}
	// Larger than files.max_write_bytes: refused on its Content-Length
	// before a byte is read.
	req, _ := http.NewRequest(http.MethodPut, h.url+filesPath(id, "/workspace/big"), strings.NewReader("x"))
	req.ContentLength = 64<<20 + 1
	req.Header.Set("Authorization", "Bearer "+session)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "F2") {
			t.Fatalf("oversized put: %d %s", resp.StatusCode, body)
		}
	}
	// A chunked body (no Content-Length) is 411.
	req, _ = http.NewRequest(http.MethodPut, h.url+filesPath(id, "/workspace/chunked"), io.MultiReader(strings.NewReader("abc")))
	req.Header.Set("Authorization", "Bearer "+session)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusLengthRequired || !strings.Contains(string(body), "length_required") {
		t.Fatalf("chunked put: %d %s", resp.StatusCode, body)
	}

	// A link out of the roots is refused by the script, whatever the
	// policy allowed on the path.
	for _, argv := range [][]string{{"ln", "-s", "/etc", "/workspace/etc"}, {"ln", "-s", "/etc/passwd", "/tmp/pw"}, {"ln", "-s", "/workspace", "/tmp/ws"}} {
		if r := h.do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": argv}); r.json(t)["exit_code"] != float64(0) {
			t.Fatalf("%v: %s", argv, r.body)
		}
	}
	expectProblem(t, h.do(http.MethodGet, filesPath(id, "/workspace/etc/passwd"), session, nil), http.StatusForbidden, "path_escapes_roots")
	expectProblem(t, h.do(http.MethodGet, filesPath(id, "/tmp/pw"), session, nil), http.StatusForbidden, "path_escapes_roots")
	expectProblem(t, h.putRaw(filesPath(id, "/workspace/etc/shadow"), session, []byte("x")), http.StatusForbidden, "path_escapes_roots")
	expectProblem(t, h.putRaw(filesPath(id, "/tmp/pw"), session, []byte("x")), http.StatusForbidden, "path_escapes_roots")
	expectProblem(t, h.do(http.MethodDelete, filesPath(id, "/workspace/etc/passwd"), session, nil), http.StatusForbidden, "path_escapes_roots")
	if b, ok := h.sim.ReadContainerFile(h.allocOf(id), "/etc/passwd"); !ok || string(b) != "root:x:0:0:root:/root:/bin/sh\n" {
		t.Fatalf("/etc/passwd changed: %q %v", b, ok)
	}
	// A link within the roots is followed; deleting a link keeps its target.
	if r := h.putRaw(filesPath(id, "/tmp/ws/via-link"), session, []byte("linked")); r.status != http.StatusOK {
		t.Fatalf("put through an in-root link: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodGet, filesPath(id, "/workspace/via-link"), session, nil); string(r.body) != "linked" {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodDelete, filesPath(id, "/tmp/pw"), session, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete link: %d %s", r.status, r.body)
	}
	if _, ok := h.sim.ReadContainerFile(h.allocOf(id), "/etc/passwd"); !ok {
		t.Fatal("deleting a link removed its target")
	}
	// Errors name the path.
	expectProblem(t, h.putRaw(filesPath(id, "/tmp/ws"), session, []byte("x")), http.StatusConflict, "is_a_directory")
	expectProblem(t, h.putRaw(filesPath(id, "/workspace/via-link/x"), session, []byte("x")), http.StatusConflict, "not_a_directory")
	expectProblem(t, h.do(http.MethodGet, filesPath(id, "/workspace/missing"), session, nil), http.StatusNotFound, "file_not_found")
}

// A PUT whose caller goes away mid-body ends the script in the sandbox:
// the gateway closes the command's stdin before the stream, since Nomad
// (and the simulator, like it) would leave it open and the script would
// wait on it until the task stops (test/e2e shows it on the real agent).
func TestFilesPutCutShortEndsTheScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.create(h.operator, nil)
	u, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	h.sim.ResetRequests()
	_, _ = fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n%s",
		filesPath(id, "/workspace/cut"), u.Host, session, strings.Repeat("x", 400))
	execPath := "GET /v1/client/allocation/" + h.allocOf(id) + "/exec"
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(h.sim.RequestLog(), execPath) {
		if time.Now().After(deadline) {
			t.Fatalf("the put never reached the simulator: %v", h.sim.RequestLog())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the 400 bytes stream into the script
	_ = conn.Close()
	// Before the fix the script's emulation waited on its stdin for good,
	// counted by RunningExecs once the socket closed.
	time.Sleep(500 * time.Millisecond)
	if n := h.sim.RunningExecs(); n != 0 {
		t.Fatalf("%d exec'd commands still running after the caller went away", n)
	}
	if _, ok := h.sim.ReadContainerFile(h.allocOf(id), "/workspace/cut"); ok {
		t.Fatal("a cut-short put wrote the file")
	}
}
