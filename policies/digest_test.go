package policies

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"sandgate/policies/policytest"
)

// tarballOf packs every regular file of dir into a gzipped bundle tarball,
// as `opa build` lays it out (slash-rooted names).
func tarballOf(t *testing.T, dir string) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	fsys := os.DirFS(dir)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "/" + p, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// digests returns the digest the engine reports for dir read as a
// directory and for the same files read as a tarball.
func digests(t *testing.T, dir string) (fromDir, fromTarball string) {
	t.Helper()
	d, err := readSource(Config{Dir: dir})
	if err != nil {
		t.Fatalf("read %s as a directory: %v", dir, err)
	}
	b, err := readSource(Config{BundleData: tarballOf(t, dir)})
	if err != nil {
		t.Fatalf("read %s as a tarball: %v", dir, err)
	}
	return d.digest, b.digest
}

// The embedded bundle, a directory and a tarball of the same files have one
// digest.
func TestTheSameFilesHaveOneDigestEmbeddedInADirectoryAndInATarball(t *testing.T) {
	t.Parallel()
	embedded, err := BundleDigest(EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	fromDir, fromTarball := digests(t, copyBundle(t))
	if fromDir != embedded || fromTarball != embedded {
		t.Fatalf("embedded %s, directory %s, tarball %s: want one digest", embedded, fromDir, fromTarball)
	}
}

// A file changes the digest exactly when OPA's loader takes something from
// it, in a directory and in a tarball. The table is checked against OPA
// itself: each row's name must really load as data or really not (a name
// OPA learned or forgot would make its row a lie).
func TestEveryDataFileOPALoadsChangesTheDigest(t *testing.T) {
	t.Parallel()
	embedded, err := BundleDigest(EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		isData bool
	}{
		{"data.json", true},
		{"data.yaml", true},
		{"data.yml", true}, // v1 missed it (issue 21)
		{"data.JSON", false},
		{"data.toml", false},
		{"data.json5", false},
		{"README.md", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := copyBundle(t)
			rel := path.Join("sandgate", "probe", tt.name)
			if err := os.MkdirAll(filepath.Join(dir, "sandgate", "probe"), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, filepath.FromSlash(rel)), `{"loaded": true}`)
			b, err := loadBundle(os.DirFS(dir), false)
			if err != nil {
				t.Fatal(err)
			}
			sg, _ := b.Data["sandgate"].(map[string]any)
			_, loaded := sg["probe"]
			if loaded != tt.isData {
				t.Fatalf("OPA loads %s as data: %t, the table says %t", rel, loaded, tt.isData)
			}
			fromDir, fromTarball := digests(t, dir)
			if fromDir != fromTarball {
				t.Fatalf("%s added: the directory digests to %s, the same files as a tarball to %s", rel, fromDir, fromTarball)
			}
			if changed := fromDir != embedded; changed != tt.isData {
				t.Fatalf("%s added: the digest changed: %t, OPA loads it: %t", rel, changed, tt.isData)
			}
		})
	}
}

// openLog is an fs.FS that notes every file opened through it.
type openLog struct {
	fs.FS
	mu     sync.Mutex
	opened []string
}

func (o *openLog) Open(name string) (fs.File, error) {
	f, err := o.FS.Open(name)
	if err == nil {
		if st, err := f.Stat(); err == nil && !st.IsDir() {
			o.mu.Lock()
			o.opened = append(o.opened, name)
			o.mu.Unlock()
		}
	}
	return f, err
}

// Whatever OPA's loader opens when it loads a bundle (with its tests, as
// `sandgate policy test` and a reload do, and without, as it serves), the
// digest covers, unless OPA takes nothing from it: the bundle loaded from
// the digested files alone is the bundle loaded from the directory. The
// set comes from OPA, not from a list of names here.
func TestTheDigestCoversEveryFileTheLoaderOpens(t *testing.T) {
	t.Parallel()
	dir := copyBundle(t)
	policytest.AddBuilderProfile(t, dir)
	writeFile(t, filepath.Join(dir, "README.md"), "notes for reviewers")
	if err := os.MkdirAll(filepath.Join(dir, "sandgate", "extra"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sandgate", "extra", "data.yaml"), "flag: true\n")
	files, err := readBundleFiles(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	covered := digested(files)
	for _, p := range []string{policytest.BuilderProfilePath, "sandgate/extra/data.yaml", ".manifest", "data.json", "authz/authz.rego"} {
		if !slices.Contains(covered, p) {
			t.Errorf("the digest does not cover %s: %v", p, covered)
		}
	}
	if slices.Contains(covered, "README.md") {
		t.Errorf("the digest covers README.md, which OPA ignores")
	}
	for _, withTests := range []bool{true, false} {
		log := &openLog{FS: os.DirFS(dir)}
		whole, err := loadBundle(log, withTests)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(log.opened, "README.md") || !slices.Contains(log.opened, policytest.BuilderProfilePath) {
			t.Fatalf("withTests=%t: the loader opened %v", withTests, log.opened)
		}
		fromDigested, err := loadBundle(files, withTests)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole.Data, fromDigested.Data) || !reflect.DeepEqual(whole.Manifest, fromDigested.Manifest) {
			t.Errorf("withTests=%t: the digested files load other data or another manifest than the directory", withTests)
		}
		if a, b := moduleFiles(whole), moduleFiles(fromDigested); !reflect.DeepEqual(a, b) {
			t.Errorf("withTests=%t: the directory loads modules %v, the digested files %v", withTests, slices.Collect(maps.Keys(a)), slices.Collect(maps.Keys(b)))
		}
	}
}

// moduleFiles maps each module of b to its source.
func moduleFiles(b *bundle.Bundle) map[string]string {
	m := map[string]string{}
	for _, f := range b.Modules {
		m[f.RelativePath] = string(f.Raw)
	}
	return m
}

// The attack of issue 21: a data.yml beside the reviewed data.json adds a
// `builder` profile with SYS_ADMIN. OPA serves it, the revision is the
// reviewed one, and the digest must say the bundle is not the reviewed one.
func TestABuilderProfileInDataYMLChangesTheDigest(t *testing.T) {
	t.Parallel()
	embedded, err := BundleDigest(EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	reviewed, err := New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := copyBundle(t)
	policytest.AddBuilderProfile(t, dir)
	tarball := tarballOf(t, dir)
	for name, cfg := range map[string]Config{"directory": {Dir: dir}, "tarball": {BundleData: tarball}} {
		e, err := New(t.Context(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		builder, ok := e.Settings().Profiles["builder"]
		if !ok || !slices.Contains(builder.CapAdd, "SYS_ADMIN") {
			t.Fatalf("%s: OPA did not load the builder profile (%+v): the attack is not reproduced", name, e.Settings().Profiles)
		}
		info := e.Info()
		if info.Revision != reviewed.Revision() {
			t.Fatalf("%s: revision %s, the reviewed %s: the attack keeps the revision", name, info.Revision, reviewed.Revision())
		}
		if info.Digest == embedded {
			t.Fatalf("%s: the bundle with a builder profile in %s reports the reviewed digest %s", name, policytest.BuilderProfilePath, embedded)
		}
	}
}

// A directory is read once: the engine serves the bytes it digested.
func TestTheEngineServesWhatItDigested(t *testing.T) {
	t.Parallel()
	dir := copyBundle(t)
	src, err := readSource(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// A change after the read reaches neither the digest nor the load.
	policytest.AddBuilderProfile(t, dir)
	b, err := loadBundle(src.fsys, false)
	if err != nil {
		t.Fatal(err)
	}
	sg, _ := b.Data["sandgate"].(map[string]any)
	cfg, _ := sg["config"].(map[string]any)
	profiles, _ := cfg["profiles"].(map[string]any)
	if _, ok := profiles["builder"]; ok {
		t.Fatal("a file written after the digest was served")
	}
	embedded, _ := BundleDigest(EmbeddedBundle())
	if src.digest != embedded {
		t.Fatalf("digest %s, want the embedded %s", src.digest, embedded)
	}
}
