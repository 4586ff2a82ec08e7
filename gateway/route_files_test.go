package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/gatewaytest"
	"sandgate/policies"
	"sandgate/policies/policytest"
	"sandgate/render/fileops"
)

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
	id, session := h.gw.Create(h.operator, nil).IDToken()
	data := make([]byte, 3<<20) // beyond the 1 MiB JSON body limit
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}

	r := h.gw.Do(http.MethodPut, filesPath(id, "/workspace/sub/dir/blob.bin", "mode", "0600"), session, data)
	if r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	info := r.JSON(t)
	if info["size"] != float64(len(data)) || info["mode"] != "0600" || info["type"] != "file" || info["path"] != "/workspace/sub/dir/blob.bin" {
		t.Fatalf("put answered %s", r.Body)
	}
	for name, want := range map[string]string{
		"X-Sandgate-Max-Write-Bytes": "67108864", "X-Sandgate-Max-Read-Bytes": "67108864",
		"X-Sandgate-Max-List-Entries": "1000", "X-Sandgate-Files-Timeout-Seconds": "300",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	r = h.gw.Do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin"), session, nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, data) {
		t.Fatalf("get: %d, %d bytes, equal %v", r.Status, len(r.Body), bytes.Equal(r.Body, data))
	}
	if r.Header.Get("Content-Type") != "application/octet-stream" || r.Header.Get("X-Sandgate-File-Mode") != "0600" || r.Header.Get("Content-Length") != "3145728" {
		t.Fatalf("get headers: %v", r.Header)
	}

	// A window of the file: ?offset=&length=, with the whole size beside.
	r = h.gw.Do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin", "offset", "1000", "length", "4096"), session, nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, data[1000:5096]) || r.Header.Get("Content-Length") != "4096" ||
		r.Header.Get("X-Sandgate-File-Size") != "3145728" || r.Header.Get("X-Sandgate-File-Offset") != "1000" {
		t.Fatalf("window: %d, %d bytes, headers %v", r.Status, len(r.Body), r.Header)
	}
	r = h.gw.Do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin", "offset", "3145720"), session, nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, data[3145720:]) {
		t.Fatalf("the tail from an offset: %d, %d bytes", r.Status, len(r.Body))
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin", "length", "0"), session, nil), http.StatusForbidden, "policy_denied", "F2")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin", "length", "64MiB"), session, nil), http.StatusBadRequest, "invalid_request")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/workspace/x", "offset", "1"), session, []byte("x")), http.StatusBadRequest, "invalid_request")

	// The simulated builtins see the same filesystem.
	r = h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"cat", "/workspace/note"}})
	if m := r.JSON(t); m["exit_code"] != float64(1) {
		t.Fatalf("cat of a missing file: %s", r.Body)
	}
	if r = h.gw.Do(http.MethodPut, filesPath(id, "/workspace/note"), session, []byte("hello\n")); r.Status != http.StatusOK {
		t.Fatalf("put note: %d %s", r.Status, r.Body)
	}
	r = h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"cat", "/workspace/note"}})
	if m := r.JSON(t); m["stdout"] != "hello\n" {
		t.Fatalf("cat of the written file: %s", r.Body)
	}

	// A listing.
	r = h.gw.Do(http.MethodGet, filesPath(id, "/workspace"), session, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list: %d %s", r.Status, r.Body)
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
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatal(err)
	}
	if l.Total != 2 || l.Truncated || len(l.Entries) != 2 || l.Entries[0].Name != "note" || l.Entries[0].Type != "file" || l.Entries[0].Size != 6 || l.Entries[1].Name != "sub" || l.Entries[1].Type != "dir" {
		t.Fatalf("listing %s", r.Body)
	}

	// Delete: a non-empty directory needs recursive=true.
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, filesPath(id, "/workspace/sub"), session, nil), http.StatusConflict, "directory_not_empty")
	if r = h.gw.Do(http.MethodDelete, filesPath(id, "/workspace/sub", "recursive", "true"), session, nil); r.Status != http.StatusNoContent {
		t.Fatalf("recursive delete: %d %s", r.Status, r.Body)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/sub/dir/blob.bin"), session, nil), http.StatusNotFound, "file_not_found")
}

func TestFilesAreConfinedByThePolicyAndTheScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	otherID := h.gw.Create(h.operator, nil).ID

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/etc/passwd"}, {http.MethodGet, "/workspace/../etc/passwd"}, {http.MethodGet, "workspace/x"},
		{http.MethodPut, "/workspace"}, {http.MethodDelete, "/tmp"}, {http.MethodGet, "/workspacefoo"},
	} {
		var r apitest.Reply
		if c.method == http.MethodPut {
			r = h.gw.Do(http.MethodPut, filesPath(id, c.path), session, []byte("x"))
		} else {
			r = h.gw.Do(c.method, filesPath(id, c.path), session, nil)
		}
		apitest.ExpectProblem(t, r, http.StatusForbidden, "policy_denied", "F1")
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, "/v1/sandboxes/"+id+"/files", session, nil), http.StatusForbidden, "policy_denied", "F1")
	// A session token reaches its own sandbox only.
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(otherID, "/workspace"), session, nil), http.StatusForbidden, "policy_denied", "T2")

	// Mode bits beyond 0777, and a mode that is not octal.
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/workspace/x", "mode", "4755"), session, []byte("x")), http.StatusForbidden, "policy_denied", "F2")
	p := apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/workspace/x", "mode", "rwx"), session, []byte("x")), http.StatusBadRequest, "invalid_request")
	if p["field"] != "mode" {
		t.Fatalf("field %v", p["field"])
	}
	// Larger than files.max_write_bytes: refused on its Content-Length
	// before a byte is read, while the client still holds back the body.
	// (net/http's client will not send a body shorter than its
	// Content-Length, so the request is written by hand.)
	big := oversizedPut(t, h.url, filesPath(id, "/workspace/big"), session)
	if !strings.Contains(big, `"F2"`) {
		t.Fatalf("oversized put: %s", big)
	}
	// A chunked body (no Content-Length) is 411.
	req, _ := http.NewRequest(http.MethodPut, h.url+filesPath(id, "/workspace/chunked"), io.MultiReader(strings.NewReader("abc")))
	req.Header.Set("Authorization", "Bearer "+session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusLengthRequired || !strings.Contains(string(body), "length_required") {
		t.Fatalf("chunked put: %d %s", resp.StatusCode, body)
	}

	// A link out of the roots is refused by the script, whatever the
	// policy allowed on the path.
	for _, argv := range [][]string{{"ln", "-s", "/etc", "/workspace/etc"}, {"ln", "-s", "/etc/passwd", "/tmp/pw"}, {"ln", "-s", "/workspace", "/tmp/ws"}} {
		if r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": argv}); r.JSON(t)["exit_code"] != float64(0) {
			t.Fatalf("%v: %s", argv, r.Body)
		}
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/etc/passwd"), session, nil), http.StatusForbidden, "path_escapes_roots")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/tmp/pw"), session, nil), http.StatusForbidden, "path_escapes_roots")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/workspace/etc/shadow"), session, []byte("x")), http.StatusForbidden, "path_escapes_roots")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/tmp/pw"), session, []byte("x")), http.StatusForbidden, "path_escapes_roots")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodDelete, filesPath(id, "/workspace/etc/passwd"), session, nil), http.StatusForbidden, "path_escapes_roots")
	if b, ok := h.sim.ReadContainerFile(h.allocOf(id), "/etc/passwd"); !ok || string(b) != "root:x:0:0:root:/root:/bin/sh\n" {
		t.Fatalf("/etc/passwd changed: %q %v", b, ok)
	}
	// A link within the roots is followed; deleting a link keeps its target.
	if r := h.gw.Do(http.MethodPut, filesPath(id, "/tmp/ws/via-link"), session, []byte("linked")); r.Status != http.StatusOK {
		t.Fatalf("put through an in-root link: %d %s", r.Status, r.Body)
	}
	if r := h.gw.Do(http.MethodGet, filesPath(id, "/workspace/via-link"), session, nil); string(r.Body) != "linked" {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	if r := h.gw.Do(http.MethodDelete, filesPath(id, "/tmp/pw"), session, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete link: %d %s", r.Status, r.Body)
	}
	if _, ok := h.sim.ReadContainerFile(h.allocOf(id), "/etc/passwd"); !ok {
		t.Fatal("deleting a link removed its target")
	}
	// Errors name the path.
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/tmp/ws"), session, []byte("x")), http.StatusConflict, "is_a_directory")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodPut, filesPath(id, "/workspace/via-link/x"), session, []byte("x")), http.StatusConflict, "not_a_directory")
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/missing"), session, nil), http.StatusNotFound, "file_not_found")
}

// garbledNomad answers every file read with a header the gateway cannot
// read, as a broken or hostile image's sh might.
type garbledNomad struct{ gateway.Nomad }

func (g garbledNomad) Exec(ctx context.Context, allocID, task string, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error) {
	if r, ok, _ := fileops.Parse(argv); ok && r.Op == fileops.OpGet {
		// As nomad.Client does: a writer's error ends the stream, as an
		// error of its own that does not wrap the writer's.
		if _, err := io.WriteString(stdout, "Z not a header\nmore"); err != nil {
			return -1, errors.New("nomad: exec: writing stdout: " + err.Error())
		}
		return 0, nil
	}
	return g.Nomad.Exec(ctx, allocID, task, argv, stdin, stdout, stderr)
}

func TestAFileReadWhoseAnswerIsMalformedSaysSo(t *testing.T) {
	t.Parallel()
	h := harnessOf(t, gatewaytest.New(t, gatewaytest.Options{Config: func(c *gateway.Config) { c.Nomad = garbledNomad{c.Nomad} }}))
	id, session := h.gw.Create(h.operator, nil).IDToken()
	p := apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace"), session, nil), http.StatusServiceUnavailable, "nomad_unavailable")
	if d, _ := p["detail"].(string); !strings.Contains(d, "was not understood") {
		t.Fatalf("detail %q does not say the answer was not understood", d)
	}
}

// The limit headers are on every answer of the files routes, a refusal
// before the handler (authentication, the policy, an unknown sandbox)
// included, so that a client learns them from whatever it got.
func TestEveryFilesAnswerCarriesTheLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	for _, c := range []struct {
		name, method, path, tok string
		status                  int
	}{
		{"a listing", http.MethodGet, filesPath(id, "/workspace"), session, http.StatusOK},
		{"a missing file", http.MethodGet, filesPath(id, "/workspace/missing"), session, http.StatusNotFound},
		{"a path outside the roots (F1)", http.MethodGet, filesPath(id, "/etc/passwd"), session, http.StatusForbidden},
		{"a root removed (F1)", http.MethodDelete, filesPath(id, "/workspace"), session, http.StatusForbidden},
		{"an unknown sandbox", http.MethodGet, filesPath("nosuchsandbox", "/workspace"), h.operator, http.StatusNotFound},
		{"no token", http.MethodGet, filesPath(id, "/workspace"), "", http.StatusUnauthorized},
	} {
		r := h.gw.Do(c.method, c.path, c.tok, nil)
		if r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
		if r.Header.Get("X-Sandgate-Max-Write-Bytes") != "67108864" || r.Header.Get("X-Sandgate-Max-Read-Bytes") != "67108864" ||
			r.Header.Get("X-Sandgate-Max-List-Entries") != "1000" || r.Header.Get("X-Sandgate-Files-Timeout-Seconds") != "300" {
			t.Errorf("%s: limit headers %v", c.name, r.Header)
		}
	}
}

// A PUT whose caller goes away mid-body ends the script in the sandbox:
// the gateway closes the command's stdin before the stream, since Nomad
// (and the simulator, like it) would leave it open and the script would
// wait on it until the task stops (test/e2e shows it on the real agent).
func TestFilesPutCutShortEndsTheScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id, session := h.gw.Create(h.operator, nil).IDToken()
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

// Under a bundle whose files.max_read_bytes is small, a whole file larger
// than it is refused (422 file_too_large, naming the bound), a window
// within it is read, and MCP's read_file asks again within the bound the
// answer's headers state, saying it lowered max_bytes.
func TestAFileLargerThanOneReadIsReadInWindows(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	found := false
	policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		old := `"max_read_bytes": 67108864`
		found = strings.Contains(string(b), old)
		return []byte(strings.Replace(string(b), old, `"max_read_bytes": 1000`, 1))
	}, &found)
	h := newHarness(t, harnessOptions{policyDir: dir})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	data := bytes.Repeat([]byte("0123456789"), 300) // 3000 bytes
	if r := h.gw.Do(http.MethodPut, filesPath(id, "/workspace/big.txt"), session, data); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	p := apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/big.txt"), session, nil), http.StatusUnprocessableEntity, "file_too_large")
	if d, _ := p["detail"].(string); !strings.Contains(d, "more than the 1000 a read returns") || !strings.Contains(d, "files.max_read_bytes") {
		t.Fatalf("detail %q", d)
	}
	r := h.gw.Do(http.MethodGet, filesPath(id, "/workspace/big.txt", "offset", "2500", "length", "1000"), session, nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, data[2500:]) || r.Header.Get("X-Sandgate-File-Size") != "3000" {
		t.Fatalf("the last window: %d %q %v", r.Status, r.Body, r.Header)
	}
	apitest.ExpectProblem(t, h.gw.Do(http.MethodGet, filesPath(id, "/workspace/big.txt", "length", "1001"), session, nil), http.StatusForbidden, "policy_denied", "F2")

	s := mcpSession(t, h, session)
	res, out := callTool(t, s, "read_file", map[string]any{"id": id, "path": "/workspace/big.txt", "offset": 100})
	if res.IsError || out["returned_bytes"] != float64(1000) || out["truncated"] != true || out["next_offset"] != float64(1100) ||
		out["content"] != string(data[100:1100]) || !strings.Contains(out["note"].(string), "max_bytes was lowered to 1000") {
		t.Fatalf("read_file under a small max_read_bytes: %v", out)
	}
}

// oversizedPut sends a file PUT whose Content-Length (64 MiB + 1) exceeds
// files.max_write_bytes, with one byte of its body, and returns the body
// of the 403 that must answer it while the rest of the body is still held
// back (the connection closes after it). The server's read deadline is the
// harness's; the wait here is bounded by the test's own deadline.
func oversizedPut(t *testing.T, base, path, tok string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if d, ok := t.Deadline(); ok {
		_ = conn.SetReadDeadline(d.Add(-5 * time.Second))
	}
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: sandgate\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\nx", path, tok, 64<<20+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("oversized put: no answer while its body is held back: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("oversized put: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// A file PUT refused on its Content-Length is answered at once, not when
// the read deadline for the body it never sends passes: before the fix
// the answer waited for up to 256 KiB of body (net/http's discard, behind
// the deadline wrapper) and came at the deadline, or the connection closed
// without it. With an hour of read deadline, only the fix answers.
func TestAnOversizedPutIsAnsweredWithoutWaitingForItsBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{config: func(c *gateway.Config) { c.ReadTimeout = time.Hour }})
	id, session := h.gw.Create(h.operator, nil).IDToken()
	big := oversizedPut(t, h.url, filesPath(id, "/workspace/big"), session)
	if !strings.Contains(big, `"F2"`) {
		t.Fatalf("oversized put: %s", big)
	}
}
