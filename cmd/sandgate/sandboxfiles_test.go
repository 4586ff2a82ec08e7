package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"sandgate/gateway/client"
	"sandgate/gateway/wire"
)

// One file up and down through sandbox cp, listed with ls and removed
// with rm, against a real gateway on the simulator.
func TestSandboxCpCopiesOneFileBothWays(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	op := g.operator
	code, out, stderr := g.cli(t, op, "sandbox", "create", "-o", "json")
	sbx := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	id, session := sbx.ID, sbx.Token
	dir := t.TempDir()
	data := bytes.Repeat([]byte("\x00\xffsandgate\n"), 200<<10) // 2.2 MiB, not UTF-8
	src := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(src, data, 0o750); err != nil { //nolint:gosec // G306: the mode under test
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o750); err != nil { //nolint:gosec // G302: the mode under test, whatever the umask
		t.Fatal(err)
	}

	// Up, with the local file's mode; -o json prints the file's information.
	code, out, stderr = g.cli(t, session, "sandbox", "cp", src, id+":/workspace/bin/run.sh")
	if mustOK(t, code, out, stderr); out != "copied 2252800 bytes to "+id+":/workspace/bin/run.sh (mode 0750)\n" {
		t.Fatalf("upload: %q", out)
	}
	code, out, stderr = g.cli(t, session, "sandbox", "cp", "--mode", "600", src, id+":/workspace/", "-o", "json")
	info := decodeJSON[client.FileInfo](t, mustOK(t, code, out, stderr))
	if info.Path != "/workspace/run.sh" || info.Mode != "0600" || info.Size != int64(len(data)) {
		t.Fatalf("upload into a directory (trailing /): %s", out)
	}
	// An existing directory without the slash receives it by its name too.
	code, out, stderr = g.cli(t, session, "sandbox", "cp", src, id+":/workspace/bin")
	if mustOK(t, code, out, stderr); !strings.Contains(out, id+":/workspace/bin/run.sh ") {
		t.Fatalf("upload into an existing directory: %q", out)
	}
	code, out, stderr = g.cliIn(t, "from stdin\n", session, "sandbox", "cp", "-", id+":/tmp/note.txt")
	if mustOK(t, code, out, stderr); out != "copied 11 bytes to "+id+":/tmp/note.txt (mode 0644)\n" {
		t.Fatalf("upload from stdin: %q", out)
	}

	// ls: a table, and the listing as JSON.
	code, out, stderr = g.cli(t, session, "sandbox", "ls", id+":/workspace")
	mustOK(t, code, out, stderr)
	if !regexp.MustCompile(`(?m)^NAME +TYPE +SIZE +MODE +MODIFIED\nbin +dir .*\nrun\.sh +file +2252800 +0600 +20\d\d-`).MatchString(out) {
		t.Fatalf("ls:\n%s", out)
	}
	code, out, stderr = g.cli(t, session, "sandbox", "ls", id+":/workspace/bin", "-o", "json")
	if l := decodeJSON[client.Listing](t, mustOK(t, code, out, stderr)); l.Total != 1 || l.Entries[0].Name != "run.sh" || l.Entries[0].Mode != "0750" {
		t.Fatalf("ls -o json: %s", out)
	}

	// Down: to a new file (the sandbox's mode, less group and other
	// write), into a directory, over an existing file (its mode kept), to
	// stdout.
	dst := filepath.Join(dir, "back.sh")
	code, out, stderr = g.cli(t, session, "sandbox", "cp", id+":/workspace/bin/run.sh", dst)
	if mustOK(t, code, out, stderr); out != "copied 2252800 bytes from "+id+":/workspace/bin/run.sh to "+dst+"\n" {
		t.Fatalf("download: %q", out)
	}
	if b, err := os.ReadFile(dst); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("downloaded %d bytes, equal %v: %v", len(b), bytes.Equal(b, data), err)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o750 {
		t.Fatalf("downloaded mode %v", st.Mode())
	}
	into := filepath.Join(dir, "into")
	if err := os.Mkdir(into, 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = g.cli(t, session, "sandbox", "cp", id+":/tmp/note.txt", into)
	mustOK(t, code, out, stderr)
	if b, err := os.ReadFile(filepath.Join(into, "note.txt")); err != nil || string(b) != "from stdin\n" {
		t.Fatalf("download into a directory: %q %v", b, err)
	}
	if err := os.Chmod(dst, 0o640); err != nil { //nolint:gosec // G302: the mode under test
		t.Fatal(err)
	}
	code, out, stderr = g.cli(t, session, "sandbox", "cp", id+":/tmp/note.txt", dst)
	mustOK(t, code, out, stderr)
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o640 {
		t.Fatalf("an existing file's mode became %v", st.Mode())
	}
	code, out, stderr = g.cli(t, session, "sandbox", "cp", id+":/workspace/run.sh", "-")
	if code != exitOK || out != string(data) || stderr != "" {
		t.Fatalf("download to stdout: exit %d, %d bytes, stderr %q", code, len(out), stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 { // run.sh back.sh into, no temporary file left
		t.Fatalf("the local directory holds %v", entries)
	}

	// rm: a file, then a directory that needs --recursive.
	code, out, stderr = g.cli(t, session, "sandbox", "rm", id+":/workspace/run.sh")
	if mustOK(t, code, out, stderr); out != "removed "+id+":/workspace/run.sh\n" {
		t.Fatalf("rm: %q", out)
	}
	code, _, stderr = g.cli(t, session, "sandbox", "rm", id+":/workspace/bin")
	if code != exitError || !strings.HasPrefix(stderr, "sandgate: 409 directory_not_empty: ") {
		t.Fatalf("rm of a non-empty directory: exit %d %s", code, stderr)
	}
	code, out, stderr = g.cli(t, session, "sandbox", "rm", "--recursive", id+":/workspace/bin")
	mustOK(t, code, out, stderr)
	code, _, stderr = g.cli(t, session, "sandbox", "cp", id+":/workspace/bin/run.sh", dst)
	if code != exitError || !strings.HasPrefix(stderr, "sandgate: 404 file_not_found: ") {
		t.Fatalf("download of a removed file: exit %d %s", code, stderr)
	}
}

// Denials exit 3 with their rules; what sandbox cp does not do (a
// directory, two local paths) is said plainly.
func TestSandboxCpRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	code, out, stderr := g.cli(t, g.operator, "sandbox", "create", "-o", "json")
	sbx := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	code, out, stderr = g.cli(t, g.operator, "sandbox", "create", "-o", "json")
	other := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)).ID
	id, session := sbx.ID, sbx.Token
	dir := t.TempDir()
	src := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(src, []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		args     []string
		code     int
		want     []string
		mustNot  string
		tokenOpt string
	}{
		{name: "a path outside the roots is F1", args: []string{"cp", src, id + ":/etc/a.txt"}, code: exitDenied,
			want: []string{"sandgate: 403 policy_denied: ", "\nrules: F1\n", "\ndecision: "}, mustNot: "hint:"},
		{name: "a root itself is F1, with a hint", args: []string{"cp", src, id + ":/workspace"}, code: exitDenied,
			want: []string{"\nrules: F1\n", "hint: a root of files.roots (/workspace, /tmp by default) is never replaced; to copy into it, end the path with / (" + id + ":/workspace/)"}},
		{name: "a mode beyond 0777 is refused before any request", args: []string{"cp", "--mode", "4755", src, id + ":/workspace/a"}, code: exitError,
			want: []string{`--mode "4755": want octal permission bits, at most 0777`}},
		{name: "another sandbox is T2", args: []string{"cp", src, other + ":/workspace/a.txt"}, code: exitDenied, want: []string{"\nrules: T2\n"}},
		{name: "ls of another sandbox is T2", args: []string{"ls", other + ":/workspace"}, code: exitDenied, want: []string{"\nrules: T2\n"}},
		{name: "a local directory is not copied", args: []string{"cp", dir, id + ":/workspace/d"}, code: exitError,
			want: []string{"is a directory: sandbox cp copies one file (no recursive copy); tar it (tar -cf dir.tar -C " + dir + " .), copy dir.tar to " + id + ":/workspace/dir.tar and unpack it with sandbox exec " + id + " -- sh -c 'mkdir -p /workspace/d && tar -xf /workspace/dir.tar -C /workspace/d'"}},
		{name: "a sandbox directory is not copied", args: []string{"cp", id + ":/workspace", filepath.Join(dir, "w")}, code: exitError,
			want: []string{"sandgate: " + id + ":/workspace is a directory: sandbox cp copies one file (no recursive copy); sandbox ls " + id + ":/workspace lists it"}},
		{name: "a file is not listed", args: []string{"ls", id + ":/workspace/a.txt"}, code: exitError,
			want: []string{"sandgate: " + id + ":/workspace/a.txt is a file, not a directory: sandbox cp " + id + ":/workspace/a.txt - prints it"}},
		{name: "two local paths", args: []string{"cp", src, filepath.Join(dir, "b")}, code: exitError, want: []string{"give one ID:/path and one local path"}},
		{name: "two sandbox paths", args: []string{"cp", id + ":/workspace/a", id + ":/workspace/b"}, code: exitError, want: []string{"give one ID:/path and one local path"}},
		{name: "a mode on a download", args: []string{"cp", "--mode", "0644", id + ":/workspace/a.txt", src}, code: exitError, want: []string{"--mode applies to an upload only"}},
		{name: "rm of a local path", args: []string{"rm", "/workspace/x"}, code: exitError, want: []string{`"/workspace/x" is not ID:/path`}},
		{name: "a misspelt flag", args: []string{"rm", "--recursiv", id + ":/workspace/x"}, code: exitError, want: []string{"unknown flag: --recursiv (did you mean --recursive?)"}},
	}
	if code, out, stderr := g.cli(t, session, "sandbox", "cp", src, id+":/workspace/a.txt"); code != exitOK {
		t.Fatalf("upload: exit %d %s %s", code, out, stderr)
	}
	for _, tc := range cases {
		code, out, stderr := g.cli(t, session, append([]string{"sandbox"}, tc.args...)...)
		if code != tc.code || out != "" {
			t.Errorf("%s: exit %d, want %d; stdout %q stderr %q", tc.name, code, tc.code, out, stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
		if tc.mustNot != "" && strings.Contains(stderr, tc.mustNot) {
			t.Errorf("%s: stderr holds %q:\n%s", tc.name, tc.mustNot, stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a refused download left %v", entries)
	}
}

// A download that breaks off leaves the local file as it was and no
// temporary file beside it.
func TestADownloadCutShortLeavesTheLocalFileAsItWas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(name, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	info := client.FileInfo{FileInfo: wire.FileInfo{Size: 100, Mode: "0644"}}
	for _, r := range []io.Reader{
		io.MultiReader(strings.NewReader("new"), iotest.ErrReader(io.ErrUnexpectedEOF)),
		strings.NewReader("too short"),
	} {
		err := writeLocal(name, r, info)
		if err == nil || !strings.Contains(err.Error(), "of 100 bytes arrived") {
			t.Fatalf("writeLocal: %v", err)
		}
	}
	if err := writeLocal(filepath.Join(dir, "missing", "x"), strings.NewReader("x"), client.FileInfo{FileInfo: wire.FileInfo{Size: 1}}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("into a missing directory: %v", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "old\n" {
		t.Fatalf("the local file became %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}
