package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
)

// TestFilesOnTheRealAgent drives the files routes (PUT, GET, DELETE of
// /v1/sandboxes/{id}/files) in every image and profile of the matrix, on
// the real agent, where the fileops script runs in the image's own shell
// and tools: a 10 MiB binary round trip checked from inside, a listing
// with odd names, deletes, links that leave the roots (refused on the real
// filesystem, /etc unchanged), a FIFO (refused without blocking) and a PUT
// whose caller goes away mid-body (nothing left behind).
func TestFilesOnTheRealAgent(t *testing.T) {
	g := startGateway(t, gwOptions{})
	blob := make([]byte, 10<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			sb := g.create(t, g.operator, map[string]any{"image": v.image, "profile": v.profile, "cpu_mhz": 500, "memory_mb": 512, "ttl_seconds": 900})
			t.Run("round trip of 10 MiB", func(t *testing.T) { filesRoundTrip(t, g, sb, blob) })
			t.Run("listing", func(t *testing.T) { filesListing(t, g, sb) })
			t.Run("delete", func(t *testing.T) { filesDelete(t, g, sb) })
			t.Run("links", func(t *testing.T) { filesLinks(t, g, sb) })
			t.Run("fifo", func(t *testing.T) { filesFIFO(t, g, sb) })
			t.Run("put cut short", func(t *testing.T) { filesPutCutShort(t, g, sb, blob) })
		})
	}
}

func filesRoundTrip(t *testing.T, g *gw, sb apitest.Created, blob []byte) {
	const p = "/workspace/sub/dir/blob.bin"
	start := time.Now()
	r := g.file(t.Context(), t, http.MethodPut, sb, p, blob, "mode", "0600")
	put := time.Since(start)
	if r.Status != http.StatusOK {
		t.Fatalf("put: %s", r)
	}
	var info struct {
		Path, Type, Mode string
		Size             int64
		ModifiedAt       string `json:"modified_at"`
	}
	if err := json.Unmarshal(r.Body, &info); err != nil {
		t.Fatalf("put answer %s: %v", r.Body, err)
	}
	mtime, err := time.Parse(time.RFC3339, info.ModifiedAt)
	if info.Path != p || info.Type != "file" || info.Size != int64(len(blob)) || info.Mode != "0600" || err != nil || time.Since(mtime).Abs() > 5*time.Minute {
		t.Fatalf("put answered %s", r.Body)
	}
	for name, want := range map[string]string{
		"X-Sandgate-Max-Write-Bytes": "67108864", "X-Sandgate-Max-Read-Bytes": "67108864",
		"X-Sandgate-Max-List-Entries": "1000", "X-Sandgate-Files-Timeout-Seconds": "300",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("put: %s %q, want %q", name, got, want)
		}
	}

	start = time.Now()
	r = g.file(t.Context(), t, http.MethodGet, sb, p, nil)
	get := time.Since(start)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, blob) {
		t.Fatalf("get: status %d, %d bytes, identical %v", r.Status, len(r.Body), bytes.Equal(r.Body, blob))
	}
	for name, want := range map[string]string{
		"Content-Type": "application/octet-stream", "Content-Length": strconv.Itoa(len(blob)),
		"X-Sandgate-File-Mode": "0600", "X-Sandgate-File-Modified": info.ModifiedAt,
		"Last-Modified": mtime.Format(http.TimeFormat), "X-Sandgate-Max-Read-Bytes": "67108864",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("get: %s %q, want %q", name, got, want)
		}
	}
	t.Logf("10 MiB: put %s (%.1f MB/s), get %s (%.1f MB/s)", put.Round(time.Millisecond), mbps(len(blob), put), get.Round(time.Millisecond), mbps(len(blob), get))

	// Windows of the file (tail -c | head -c in the image): inside, at
	// the end, past the end.
	for _, w := range []struct{ off, length, want int }{{1 << 20, 65536, 65536}, {len(blob) - 10, 100, 10}, {len(blob) + 1, 5, 0}} {
		r = g.file(t.Context(), t, http.MethodGet, sb, p, nil, "offset", strconv.Itoa(w.off), "length", strconv.Itoa(w.length))
		from := min(w.off, len(blob))
		if r.Status != http.StatusOK || !bytes.Equal(r.Body, blob[from:from+w.want]) || r.Header.Get("X-Sandgate-File-Size") != strconv.Itoa(len(blob)) ||
			r.Header.Get("X-Sandgate-File-Offset") != strconv.Itoa(w.off) {
			t.Fatalf("window %+v: status %d, %d bytes, headers %v", w, r.Status, len(r.Body), r.Header)
		}
	}

	// The image's own tools agree with what was sent.
	sum := sha256.Sum256(blob)
	out := g.sh(t, sb.ID, sb.Token, "cd /workspace/sub/dir && sha256sum blob.bin && wc -c < blob.bin && stat -c %a blob.bin && ls -a")
	want := []string{hex.EncodeToString(sum[:]) + "  blob.bin", strconv.Itoa(len(blob)), "600", ".", "..", "blob.bin"}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i := range got {
		got[i] = strings.TrimSpace(got[i])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("inside the sandbox: %q, want %q", got, want)
	}

	// A second put replaces the file whole, with the default mode.
	if r = g.file(t.Context(), t, http.MethodPut, sb, p, []byte("small\n")); r.Status != http.StatusOK || r.JSON(t)["mode"] != "0644" || r.JSON(t)["size"] != float64(6) {
		t.Fatalf("replacing put: %s", r)
	}
	if r = g.file(t.Context(), t, http.MethodGet, sb, p, nil); r.Status != http.StatusOK || string(r.Body) != "small\n" || r.Header.Get("X-Sandgate-File-Mode") != "0644" {
		t.Fatalf("get of the replaced file: %s %v", r, r.Header)
	}
}

func filesListing(t *testing.T, g *gw, sb apitest.Created) {
	g.sh(t, sb.ID, sb.Token, `cd /workspace && mkdir list && cd list && mkdir d && : > 'sp ace' && printf 12345 > "$(printf 'new\nline')" && printf ab > '-rf' && : > .hidden && ln -s d link`)
	r := g.file(t.Context(), t, http.MethodGet, sb, "/workspace/list", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list: %s", r)
	}
	var l struct {
		Path    string
		Entries []struct {
			Name, Type, Mode string
			Size             int64
			ModifiedAt       string `json:"modified_at"`
		}
		Truncated bool
		Total     int
	}
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatalf("listing %s: %v", r.Body, err)
	}
	got := map[string]string{}
	for _, e := range l.Entries {
		if _, err := time.Parse(time.RFC3339, e.ModifiedAt); err != nil || len(e.Mode) != 4 {
			t.Errorf("entry %q: mode %q, modified_at %q", e.Name, e.Mode, e.ModifiedAt)
		}
		got[e.Name] = fmt.Sprintf("%s %d", e.Type, e.Size)
	}
	want := map[string]string{"d": "dir", "sp ace": "file 0", "new\nline": "file 5", "-rf": "file 2", ".hidden": "file 0", "link": "symlink 1"}
	for name, w := range want {
		if e := got[name]; e != w && (w != "dir" || !strings.HasPrefix(e, "dir ")) {
			t.Errorf("entry %q: %q, want %q", name, e, w)
		}
	}
	if l.Path != "/workspace/list" || l.Total != len(want) || len(l.Entries) != len(want) || l.Truncated {
		t.Fatalf("listing: %s", r.Body)
	}
	// The listing of /workspace holds what the other subtests made.
	if r = g.file(t.Context(), t, http.MethodGet, sb, "/workspace", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"name":"list","type":"dir"`) {
		t.Fatalf("list /workspace: %s", r)
	}
}

func filesDelete(t *testing.T, g *gw, sb apitest.Created) {
	for _, p := range []string{"/tmp/del/a/one", "/tmp/del/a/b/two"} {
		if r := g.file(t.Context(), t, http.MethodPut, sb, p, []byte(p)); r.Status != http.StatusOK {
			t.Fatalf("put %s: %s", p, r)
		}
	}
	apitest.ExpectProblem(t, g.file(t.Context(), t, http.MethodDelete, sb, "/tmp/del", nil), http.StatusConflict, "directory_not_empty")
	if r := g.file(t.Context(), t, http.MethodDelete, sb, "/tmp/del/a/one", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete a file: %s", r)
	}
	apitest.ExpectProblem(t, g.file(t.Context(), t, http.MethodDelete, sb, "/tmp/del/a/one", nil), http.StatusNotFound, "file_not_found")
	if r := g.file(t.Context(), t, http.MethodDelete, sb, "/tmp/del", nil, "recursive", "true"); r.Status != http.StatusNoContent {
		t.Fatalf("recursive delete: %s", r)
	}
	if out := g.sh(t, sb.ID, sb.Token, "ls -a /tmp; [ ! -e /tmp/del ] && echo gone"); !strings.HasSuffix(out, "gone\n") {
		t.Fatalf("after the recursive delete: %q", out)
	}
	apitest.ExpectProblem(t, g.file(t.Context(), t, http.MethodGet, sb, "/tmp/del/a/b/two", nil), http.StatusNotFound, "file_not_found")
}

func filesLinks(t *testing.T, g *gw, sb apitest.Created) {
	// What /etc holds, as the image's tools see it: before and after.
	const etcState = `stat -c '%n %s %Y %i' /etc /etc/passwd && ls -a /etc && cat /etc/passwd`
	before := g.sh(t, sb.ID, sb.Token, etcState)
	g.sh(t, sb.ID, sb.Token, `ln -s /etc /workspace/etc && ln -s /etc/passwd /tmp/pw && ln -s ../etc /workspace/up && ln -s /nowhere /workspace/dangling`)
	for _, c := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodGet, "/workspace/etc/passwd", nil}, {http.MethodGet, "/tmp/pw", nil}, {http.MethodGet, "/workspace/etc", nil},
		{http.MethodGet, "/workspace/up/passwd", nil}, {http.MethodGet, "/workspace/dangling", nil},
		{http.MethodPut, "/workspace/etc/x", []byte("x")}, {http.MethodPut, "/workspace/etc/new/dir/x", []byte("x")},
		{http.MethodPut, "/tmp/pw", []byte("x")}, {http.MethodPut, "/workspace/up/x", []byte("x")},
		{http.MethodDelete, "/workspace/etc/passwd", nil}, {http.MethodDelete, "/workspace/up/passwd", nil},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			apitest.ExpectProblem(t, g.file(t.Context(), t, c.method, sb, c.path, c.body), http.StatusForbidden, "path_escapes_roots")
		})
	}
	if after := g.sh(t, sb.ID, sb.Token, etcState); after != before {
		t.Fatalf("/etc changed:\n%s\nafter:\n%s", before, after)
	}
	if out := g.sh(t, sb.ID, sb.Token, `for p in /etc/x /etc/new; do [ -e "$p" ] && echo "$p"; done; echo checked`); out != "checked\n" {
		t.Fatalf("written outside the roots: %q", out)
	}

	// Deleting a link removes the link, never its target.
	if r := g.file(t.Context(), t, http.MethodDelete, sb, "/workspace/etc", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete the link: %s", r)
	}
	if r := g.file(t.Context(), t, http.MethodDelete, sb, "/tmp/pw", nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete the link: %s", r)
	}
	if after := g.sh(t, sb.ID, sb.Token, etcState); after != before {
		t.Fatalf("deleting links changed /etc:\n%s\nafter:\n%s", before, after)
	}

	// Links that stay in the roots are followed, absolute or relative.
	if r := g.file(t.Context(), t, http.MethodPut, sb, "/workspace/inroot/a.txt", []byte("hello")); r.Status != http.StatusOK {
		t.Fatalf("put: %s", r)
	}
	g.sh(t, sb.ID, sb.Token, `ln -s /workspace/inroot /tmp/in && ln -s a.txt /workspace/inroot/rel`)
	for _, p := range []string{"/tmp/in/a.txt", "/workspace/inroot/rel", "/tmp/in/rel"} {
		if r := g.file(t.Context(), t, http.MethodGet, sb, p, nil); r.Status != http.StatusOK || string(r.Body) != "hello" {
			t.Errorf("get %s: %s", p, r)
		}
	}
	if r := g.file(t.Context(), t, http.MethodPut, sb, "/tmp/in/b.txt", []byte("via link")); r.Status != http.StatusOK || r.JSON(t)["path"] != "/tmp/in/b.txt" {
		t.Fatalf("put through an in-root link: %s", r)
	}
	if out := g.sh(t, sb.ID, sb.Token, "cat /workspace/inroot/b.txt"); out != "via link" {
		t.Fatalf("the put through /tmp/in landed elsewhere: %q", out)
	}
	if r := g.file(t.Context(), t, http.MethodPut, sb, "/workspace/inroot/rel", []byte("replaced")); r.Status != http.StatusOK {
		t.Fatalf("put onto an in-root link: %s", r)
	}
	if out := g.sh(t, sb.ID, sb.Token, "cat /workspace/inroot/a.txt; [ -L /workspace/inroot/rel ] && echo ' still a link'"); out != "replaced still a link\n" {
		t.Fatalf("a put onto a link writes its target: %q", out)
	}
}

func filesFIFO(t *testing.T, g *gw, sb apitest.Created) {
	res := g.exec(t, sb.ID, sb.Token, map[string]any{"argv": []string{"sh", "-c", "command -v mkfifo >/dev/null || exit 3; mkfifo /tmp/fifo"}})
	if res.code() == 3 {
		t.Skip("the image has no mkfifo")
	}
	if res.code() != 0 {
		t.Fatalf("mkfifo: %+v", res)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	apitest.ExpectProblem(t, g.file(ctx, t, http.MethodGet, sb, "/tmp/fifo", nil), http.StatusUnprocessableEntity, "not_a_regular_file")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	r := g.file(ctx, t, http.MethodGet, sb, "/tmp", nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"name":"fifo","type":"other"`) {
		t.Fatalf("list /tmp: %s", r)
	}
	// Writing onto it replaces it with a regular file; nothing blocks.
	if r := g.file(ctx, t, http.MethodPut, sb, "/tmp/fifo", []byte("now a file")); r.Status != http.StatusOK {
		t.Fatalf("put onto a FIFO: %s", r)
	}
	if r := g.file(ctx, t, http.MethodGet, sb, "/tmp/fifo", nil); r.Status != http.StatusOK || string(r.Body) != "now a file" {
		t.Fatalf("get after the put: %s", r)
	}
}

// filesPutCutShort sends half of a PUT's declared body on a raw
// connection, waits until the script's temporary file is there (the body
// is streaming into the sandbox), then closes the connection.
func filesPutCutShort(t *testing.T, g *gw, sb apitest.Created, blob []byte) {
	g.sh(t, sb.ID, sb.Token, "mkdir -p /workspace/cut")
	u, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		filesURL(sb.ID, "/workspace/cut/blob.bin"), u.Host, sb.Token, len(blob))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(blob[:len(blob)/2]); err != nil {
		t.Fatal(err)
	}
	const list = "ls -a /workspace/cut"
	eventually(t, 30*time.Second, "the put's temporary file appears in /workspace/cut", func() bool {
		return strings.Contains(g.sh(t, sb.ID, sb.Token, list), ".sandgate-put.")
	})
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The script saw its stdin end, found it short, removed its temporary
	// file and exited: no process of it is left (the pattern does not match
	// its own command line).
	const left = `ls -a /workspace/cut; grep -l 'sandgate-file[s]' /proc/[0-9]*/cmdline 2>/dev/null; true`
	eventually(t, 30*time.Second, "neither the target, the temporary file nor the script is left", func() bool {
		return g.sh(t, sb.ID, sb.Token, left) == ".\n..\n"
	})
	t.Logf("cleaned up %s after the caller went away", time.Since(start).Round(time.Millisecond))
	// The sandbox still takes a whole put there.
	if r := g.file(t.Context(), t, http.MethodPut, sb, "/workspace/cut/blob.bin", blob[:1<<20]); r.Status != http.StatusOK {
		t.Fatalf("a put after the cut one: %s", r)
	}
}

// file is one files request with a session token: body, when not nil, is
// sent raw with its Content-Length; extra are query pairs.
func (g *gw) file(ctx context.Context, t testing.TB, method string, sb apitest.Created, p string, body []byte, extra ...string) apitest.Reply {
	t.Helper()
	var b any // nil sends no body
	if body != nil {
		b = body
	}
	return g.api(t).DoWith(apitest.Request{Method: method, Path: filesURL(sb.ID, p, extra...), Token: sb.Token, Body: b, Context: ctx})
}

// filesURL is the files route of a sandbox with ?path= and extra query
// pairs.
func filesURL(id, p string, extra ...string) string {
	q := url.Values{"path": {p}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/v1/sandboxes/" + id + "/files?" + q.Encode()
}

// mbps is n bytes in d as decimal megabytes per second.
func mbps(n int, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
