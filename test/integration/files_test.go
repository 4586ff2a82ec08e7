package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sandgate/gateway/apitest"
	"sandgate/test/testbin"
)

// A file round trip over HTTP, against the binary (on the simulator, and
// through test/e2e on the real agent): a binary file written, read back
// byte for byte, listed and removed; a symbolic link out of the roots
// refused by the script inside the sandbox.
func TestAFileRoundTripOverHTTP(t *testing.T) {
	bin, data := testbin.Build(t), t.TempDir()
	agent := mintAgent(t, bin, data, "agent-files")
	g := startGateway(t, bin, data)
	id, session := g.runningSandbox(t, agent)
	files := func(method, p string, body []byte, extra ...string) (int, http.Header, []byte) {
		t.Helper()
		q := url.Values{"path": {p}}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Set(extra[i], extra[i+1])
		}
		var b any // nil sends no body
		if body != nil {
			b = body
		}
		r := g.api(t).DoWith(apitest.Request{Method: method, Path: "/v1/sandboxes/" + id + "/files?" + q.Encode(), Token: session, Body: b})
		return r.Status, r.Header, r.Body
	}
	problem := func(b []byte) string {
		var p struct{ Code string }
		_ = json.Unmarshal(b, &p)
		return p.Code
	}

	blob := make([]byte, 2<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	status, _, b := files(http.MethodPut, "/workspace/in/blob.bin", blob, "mode", "0640")
	if status != http.StatusOK || !strings.Contains(string(b), `"mode":"0640"`) || !strings.Contains(string(b), `"size":2097152`) {
		t.Fatalf("put: %d %s", status, b)
	}
	status, h, b := files(http.MethodGet, "/workspace/in/blob.bin", nil)
	if status != http.StatusOK || !bytes.Equal(b, blob) || h.Get("X-Sandgate-File-Mode") != "0640" {
		t.Fatalf("get: %d, %d bytes, equal %v, mode %q", status, len(b), bytes.Equal(b, blob), h.Get("X-Sandgate-File-Mode"))
	}
	if g.real { // the sandbox's own tools agree on what arrived
		sum := sha256.Sum256(blob)
		r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"sha256sum", "/workspace/in/blob.bin"}})
		if out, _ := r.JSON(t)["stdout"].(string); !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
			t.Fatalf("sha256sum in the sandbox: %s", r.Body)
		}
	}
	status, _, b = files(http.MethodGet, "/workspace", nil)
	if status != http.StatusOK || !strings.Contains(string(b), `"name":"in","type":"dir"`) || !strings.Contains(string(b), `"truncated":false,"total":1`) {
		t.Fatalf("list: %d %s", status, b)
	}

	// A link out of the roots, made inside the sandbox, is refused.
	r := g.api(t).Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"ln", "-s", "/etc", "/workspace/etc"}})
	if r.JSON(t)["exit_code"] != float64(0) {
		t.Fatalf("ln -s: %s", r.Body)
	}
	for _, c := range []struct {
		method, path string
		body         []byte
	}{{http.MethodGet, "/workspace/etc/passwd", nil}, {http.MethodPut, "/workspace/etc/sandgate-was-here", []byte("x")}, {http.MethodDelete, "/workspace/etc/passwd", nil}} {
		if status, _, b := files(c.method, c.path, c.body); status != http.StatusForbidden || problem(b) != "path_escapes_roots" {
			t.Fatalf("%s %s through a link to /etc: %d %s", c.method, c.path, status, b)
		}
	}
	// And the policy refuses the path itself (F1).
	if status, _, b := files(http.MethodGet, "/etc/passwd", nil); status != http.StatusForbidden || !strings.Contains(string(b), `"F1"`) {
		t.Fatalf("get /etc/passwd: %d %s", status, b)
	}

	if status, _, b := files(http.MethodDelete, "/workspace/in", nil); status != http.StatusConflict || problem(b) != "directory_not_empty" {
		t.Fatalf("delete a non-empty directory: %d %s", status, b)
	}
	if status, _, b := files(http.MethodDelete, "/workspace/in", nil, "recursive", "true"); status != http.StatusNoContent {
		t.Fatalf("recursive delete: %d %s", status, b)
	}
	if status, _, b := files(http.MethodGet, "/workspace/in/blob.bin", nil); status != http.StatusNotFound || problem(b) != "file_not_found" {
		t.Fatalf("get after delete: %d %s", status, b)
	}
}
