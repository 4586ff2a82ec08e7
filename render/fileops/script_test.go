package fileops

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The script runs here on the test machine's own shells, inside a
// temporary directory that stands for the container's filesystem: /bin/sh
// with the host's GNU tools, and busybox's sh with only busybox applets on
// PATH when busybox is installed (the e2e suite's busybox image is the
// same binary). The real agent runs it again in both images (test/e2e).

type shell struct {
	name string
	argv []string // the interpreter, replacing Shell
	env  []string
}

func shells(t *testing.T) []shell {
	out := []shell{{name: "sh+gnu", argv: []string{"/bin/sh"}, env: []string{"PATH=/usr/bin:/bin"}}}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Log("busybox is not installed: only /bin/sh with GNU tools runs the script here")
		return out
	}
	dir := t.TempDir()
	list, err := exec.Command(bb, "--list").Output() //nolint:gosec // G204: the busybox found on PATH, in a test
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if err := os.Symlink(bb, filepath.Join(dir, applet)); err != nil {
			t.Fatal(err)
		}
	}
	return append(out, shell{name: "busybox", argv: []string{bb, "sh"}, env: []string{"PATH=" + dir}})
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs r under sh with the roots mapped into the temporary tree base.
func run(t *testing.T, sh shell, r Request, stdin []byte) result {
	t.Helper()
	args := r.Args()
	cmd := exec.Command(sh.argv[0], append(sh.argv[1:], args[1:]...)...) //nolint:gosec // G204: the script under test, run on the host in a temporary tree
	cmd.Env = sh.env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func TestTheScriptOnTheHostsShells(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			base := t.TempDir()
			base, _ = filepath.EvalSymlinks(base)
			ws, tmp, etc := filepath.Join(base, "workspace"), filepath.Join(base, "tmp"), filepath.Join(base, "etc")
			for _, d := range []string{ws, tmp, etc} {
				if err := os.Mkdir(d, 0o750); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			roots := []string{ws, tmp}
			req := func(op Op, p string) Request {
				return Request{Op: op, Path: p, Mode: 0o640, MaxBytes: 1 << 20, MaxEntries: 3, Roots: roots}
			}
			put := func(p string, data []byte) result {
				r := req(OpPut, p)
				r.Size = int64(len(data))
				return run(t, sh, r, data)
			}

			// A put creates the parents, sets the mode and reports it.
			data := []byte("hello\x00\xff binary\n")
			res := put(ws+"/a/b/c.bin", data)
			if res.code != 0 {
				t.Fatalf("put: %+v", res)
			}
			st, err := ParseStat(strings.TrimSpace(res.stdout))
			if err != nil || st.Size != int64(len(data)) || st.Mode != 0o640 {
				t.Fatalf("put answered %q (%+v, %v)", res.stdout, st, err)
			}
			// A get returns the header and the bytes.
			res = run(t, sh, req(OpGet, ws+"/a/b/c.bin"), nil)
			line, body, _ := strings.Cut(res.stdout, "\n")
			h, err := ParseHeader(line)
			if res.code != 0 || err != nil || h.Dir || h.File.Size != int64(len(data)) || body != string(data) {
				t.Fatalf("get: %+v %+v %v", res, h, err)
			}
			// A window of the file: from an offset, at most a length.
			for _, w := range []struct{ off, length, want int64 }{{3, 4, 4}, {3, 0, int64(len(data)) - 3}, {int64(len(data)) - 2, 100, 2}, {int64(len(data)) + 5, 10, 0}, {0, 1, 1}} {
				r := req(OpGet, ws+"/a/b/c.bin")
				r.Offset, r.Length = w.off, w.length
				res := run(t, sh, r, nil)
				line, body, _ := strings.Cut(res.stdout, "\n")
				h, err := ParseHeader(line)
				start := min(w.off, int64(len(data)))
				if res.code != 0 || err != nil || h.Offset != w.off || h.Length != w.want || h.File.Size != int64(len(data)) || body != string(data[start:start+w.want]) {
					t.Fatalf("window %+v: %+v %+v %v", w, res, h, err)
				}
			}
			// A window larger than MAX is refused; a smaller one of a larger file is not.
			r := req(OpGet, ws+"/a/b/c.bin")
			r.MaxBytes, r.Offset, r.Length = 4, 2, 4
			if res := run(t, sh, r, nil); res.code != 0 || !strings.HasSuffix(res.stdout, string(data[2:6])) {
				t.Fatalf("a window within MAX of a larger file: %+v", res)
			}
			r.Length = 5
			if res := run(t, sh, r, nil); res.code != ExitTooLarge || res.stdout != "" {
				t.Fatalf("a window over MAX: %+v", res)
			}
			// A short body writes nothing.
			r = req(OpPut, ws+"/short")
			r.Size = 10
			if res = run(t, sh, r, []byte("abc")); res.code != ExitShort {
				t.Fatalf("short put: %+v", res)
			}
			if _, err := os.Lstat(ws + "/short"); !os.IsNotExist(err) {
				t.Fatalf("a short put left the file: %v", err)
			}
			if left, _ := filepath.Glob(ws + "/.sandgate-put.*"); len(left) > 0 {
				t.Fatalf("a short put left %v", left)
			}

			// Links: inside the roots they are followed; out of them refused.
			must(t, os.Symlink(etc, ws+"/out"))
			must(t, os.Symlink(etc+"/passwd", ws+"/pw"))
			must(t, os.Symlink(ws+"/a", tmp+"/in"))
			must(t, os.Symlink(base+"/nowhere", ws+"/dangling"))
			for _, c := range []struct {
				op   Op
				path string
			}{
				{OpGet, ws + "/out/passwd"}, {OpGet, ws + "/pw"}, {OpGet, ws + "/out"},
				{OpPut, ws + "/out/x"}, {OpPut, ws + "/out/new/dir/x"}, {OpPut, ws + "/pw"},
				{OpDelete, ws + "/out/passwd"},
			} {
				r := req(c.op, c.path)
				if res := run(t, sh, r, nil); res.code != ExitEscapes {
					t.Errorf("%s %s: want exit %d, got %+v", c.op, c.path, ExitEscapes, res)
				}
			}
			if b, _ := os.ReadFile(etc + "/passwd"); string(b) != "root:x:0:0\n" {
				t.Fatalf("/etc/passwd changed: %q", b)
			}
			if _, err := os.Lstat(etc + "/x"); !os.IsNotExist(err) {
				t.Fatal("a put through a link wrote outside the roots")
			}
			if _, err := os.Lstat(etc + "/new"); !os.IsNotExist(err) {
				t.Fatal("a put through a link made directories outside the roots")
			}
			if res := run(t, sh, req(OpGet, tmp+"/in/b/c.bin"), nil); res.code != 0 || !strings.HasSuffix(res.stdout, string(data)) {
				t.Fatalf("a link within the roots is followed: %+v", res)
			}
			if res := run(t, sh, req(OpGet, ws+"/dangling"), nil); res.code != ExitEscapes {
				t.Fatalf("dangling link: %+v", res)
			}
			// Delete removes the link, never its target.
			if res := run(t, sh, req(OpDelete, ws+"/pw"), nil); res.code != 0 {
				t.Fatalf("delete link: %+v", res)
			}
			if _, err := os.Stat(etc + "/passwd"); err != nil {
				t.Fatal("deleting a link removed its target")
			}

			// Errors.
			for _, c := range []struct {
				op   Op
				path string
				want int
			}{
				{OpGet, ws + "/missing", ExitNotFound}, {OpGet, ws + "/missing/x", ExitNotFound},
				{OpDelete, ws + "/missing", ExitNotFound}, {OpPut, ws + "/a", ExitIsDirectory},
				{OpPut, ws + "/a/b/c.bin/x", ExitNotDir}, {OpDelete, ws + "/a", ExitNotEmpty},
			} {
				if res := run(t, sh, req(c.op, c.path), nil); res.code != c.want {
					t.Errorf("%s %s: want exit %d, got %+v", c.op, c.path, c.want, res)
				}
			}
			big := req(OpGet, ws+"/a/b/c.bin")
			big.MaxBytes = 3
			if res := run(t, sh, big, nil); res.code != ExitTooLarge || res.stdout != "" {
				t.Fatalf("too large: %+v", res)
			}

			// Listing: bounded, with odd names intact.
			for _, n := range []string{"-rf", "line\nbreak", `back\slash`, ".hidden", "sp ace"} {
				must(t, os.WriteFile(filepath.Join(tmp, n), []byte(n), 0o600))
			}
			r = req(OpGet, tmp)
			r.MaxEntries = 100
			res = run(t, sh, r, nil)
			line, body, _ = strings.Cut(res.stdout, "\n")
			if h, err = ParseHeader(line); res.code != 0 || err != nil || !h.Dir || h.Total != 6 || h.Listed != 6 {
				t.Fatalf("listing: %+v %+v %v", res, h, err)
			}
			entries, err := ParseListing([]byte(body), h.Listed)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Entry{}
			for _, e := range entries {
				got[e.Name] = e
			}
			for _, n := range []string{"-rf", "line\nbreak", `back\slash`, ".hidden", "sp ace"} {
				if e, ok := got[n]; !ok || e.Type != "file" || e.Size != int64(len(n)) || e.Mode != 0o600 {
					t.Errorf("entry %q: %+v (listing %q)", n, e, body)
				}
			}
			if e := got["in"]; e.Type != "symlink" {
				t.Errorf("a link is listed as itself: %+v", e)
			}
			r.MaxEntries = 2
			res = run(t, sh, r, nil)
			line, body, _ = strings.Cut(res.stdout, "\n")
			if h, err = ParseHeader(line); err != nil || h.Total != 6 || h.Listed != 2 {
				t.Fatalf("bounded listing: %q %+v %v", res.stdout, h, err)
			}
			if _, err := ParseListing([]byte(body), 2); err != nil {
				t.Fatal(err)
			}
			// A FIFO is refused, never read.
			must(t, exec.Command("mkfifo", tmp+"/fifo").Run()) //nolint:gosec // G204: a path in the test's temporary tree
			if res := run(t, sh, req(OpGet, tmp+"/fifo"), nil); res.code != ExitNotRegular {
				t.Fatalf("fifo: %+v", res)
			}
			// Recursive delete.
			r = req(OpDelete, ws+"/a")
			r.Recursive = true
			if res := run(t, sh, r, nil); res.code != 0 {
				t.Fatalf("recursive delete: %+v", res)
			}
			if _, err := os.Lstat(ws + "/a"); !os.IsNotExist(err) {
				t.Fatal("recursive delete left the directory")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestArgsRoundTrip(t *testing.T) {
	r := Request{Op: OpPut, Path: "/workspace/x", Mode: 0o755, Size: 12, MaxBytes: 99, MaxEntries: 7, Recursive: true, Roots: []string{"/workspace/", "/tmp"}}
	got, ok, err := Parse(r.Args())
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	r.Roots = []string{"/workspace", "/tmp"}
	if got.Op != r.Op || got.Path != r.Path || got.Mode != r.Mode || got.Size != r.Size || got.MaxBytes != r.MaxBytes ||
		got.MaxEntries != r.MaxEntries || got.Recursive != r.Recursive || strings.Join(got.Roots, ",") != "/workspace,/tmp" {
		t.Fatalf("round trip: %+v", got)
	}
	if _, ok, _ := Parse([]string{"/bin/sh", "-c", "echo"}); ok {
		t.Fatal("another argv parsed as a file operation")
	}
}

// A put whose stdin stays open (its gateway went away without closing it)
// ends at its Timeout and leaves nothing, on both shells.
func TestAPutWhoseStdinNeverEndsStopsAtItsTimeout(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			ws := t.TempDir()
			r := Request{Op: OpPut, Path: ws + "/slow", Mode: 0o644, Size: 10, MaxBytes: 1, MaxEntries: 1, Timeout: time.Second, Roots: []string{ws}}
			args := r.Args()
			cmd := exec.Command(sh.argv[0], append(sh.argv[1:], args[1:]...)...) //nolint:gosec // G204: the script under test, run on the host in a temporary tree
			cmd.Env = sh.env
			// An os.Pipe, handed to the shell as its stdin and kept open
			// by the test (an io.Pipe would make Run wait for its copy).
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Close()
			defer pr.Close()
			cmd.Stdin = pr
			if _, err := pw.Write([]byte("abc")); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != ExitWriteFailed {
				t.Fatalf("exit %v, want %d", err, ExitWriteFailed)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("the put ended %s after it began, for a 1 s timeout", took)
			}
			if left, _ := filepath.Glob(ws + "/*"); len(left) > 0 {
				t.Fatalf("left %v", left)
			}
			left, _ := filepath.Glob(ws + "/.sandgate-put.*")
			if len(left) > 0 {
				t.Fatalf("left %v", left)
			}
		})
	}
}
