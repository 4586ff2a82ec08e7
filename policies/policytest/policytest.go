// Package policytest writes policy bundles for tests: a copy of a bundle
// (the embedded one, usually), edited file by file, and the same with its
// Rego tests replaced by one small test per entrypoint, so that a reload,
// which runs a bundle's tests, takes a second rather than a minute under
// -race. It imports nothing of sandgate but the standard-library-only
// datapatch, so the policies package's own tests use it too.
package policytest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sandgate/policies/datapatch"
)

// Edit returns a file's new content; returning nil drops the file.
type Edit func(path string, data []byte) ([]byte, error)

// Copy writes every file of fsys into a new temporary directory, through
// edit when it is not nil, and returns the directory.
func Copy(t testing.TB, fsys fs.FS, edit Edit) string {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if edit != nil {
			if data, err = edit(p, data); err != nil || data == nil {
				return err
			}
		}
		out := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// CopyWithSmallTests is Copy with every *_test.rego dropped and, for each
// entrypoint (package sandgate.<entrypoint>), one test of its own: an
// empty input is denied.
func CopyWithSmallTests(t testing.TB, fsys fs.FS, entrypoints []string) string {
	t.Helper()
	dir := Copy(t, fsys, func(p string, data []byte) ([]byte, error) {
		if strings.HasSuffix(p, "_test.rego") {
			return nil, nil
		}
		return data, nil
	})
	for _, ep := range entrypoints {
		if err := os.MkdirAll(filepath.Join(dir, ep), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ep, "small_test.rego"), []byte(SmallTest(ep)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// SmallTest is one Rego test of entrypoint ep: an empty input is denied.
func SmallTest(ep string) string {
	return "package sandgate." + ep + "_test\n\n" +
		"test_an_empty_input_is_denied if {\n" +
		"\td := data.sandgate." + ep + ".decision with input as {}\n" +
		"\td.allow == false\n" +
		"}\n"
}

// SetRevision rewrites the revision in a copied bundle's manifest.
func SetRevision(t testing.TB, dir, rev string) {
	t.Helper()
	manifest := `{"revision": "` + rev + `", "roots": ["sandgate"], "rego_version": 1}`
	if err := os.WriteFile(filepath.Join(dir, ".manifest"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
}

// EditFile rewrites one file of a copied bundle through edit and returns dir;
// *done, when not nil, must be true afterwards (edit found what it
// changes).
func EditFile(t testing.TB, dir, file string, edit func([]byte) []byte, done *bool) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(file))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if done != nil && !*done {
		t.Fatalf("%s: the edit changed nothing", file)
	}
	return dir
}

// MergePatch applies an RFC 7386 JSON merge patch to target and returns
// the result; target is not modified (datapatch.Merge).
func MergePatch(target, patch any) any { return datapatch.Merge(target, patch) }

// BuilderProfileYAML is the profile an attacker added to a reviewed bundle
// (issue 21): a `builder` with SYS_ADMIN and a writable root, in a data.yml
// that OPA loads as data.sandgate.config.profiles and that the v1 digest did
// not cover.
const BuilderProfileYAML = `builder:
  cap_add: [SYS_ADMIN, CHOWN, DAC_OVERRIDE, FOWNER, SETGID, SETUID]
  readonly_rootfs: false
`

// BuilderProfilePath is where BuilderProfileYAML goes in a bundle.
const BuilderProfilePath = "sandgate/config/profiles/data.yml"

// AddBuilderProfile writes BuilderProfileYAML into the bundle directory dir.
func AddBuilderProfile(t testing.TB, dir string) {
	t.Helper()
	out := filepath.Join(dir, filepath.FromSlash(BuilderProfilePath))
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(BuilderProfileYAML), 0o600); err != nil {
		t.Fatal(err)
	}
}
