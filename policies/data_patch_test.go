package policies

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sandgate/policies/policytest"
)

// e2eDataPatch is the RFC 7386 merge patch the end-to-end suite applies to
// data.json (its images and architecture are not the deployment's).
const e2eDataPatch = "../test/testdata/e2e-policy-data-patch.json"

// mergePatch is policytest.MergePatch (RFC 7386).
func mergePatch(target, patch any) any { return policytest.MergePatch(target, patch) }

func TestMergePatchFollowsRFC7386(t *testing.T) {
	t.Parallel()
	// Cases from RFC 7386, Appendix A.
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	} {
		var docs [3]any
		for i, s := range []string{tc.target, tc.patch, tc.want} {
			if err := json.Unmarshal([]byte(s), &docs[i]); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		if got := mergePatch(docs[0], docs[1]); !reflect.DeepEqual(got, docs[2]) {
			t.Errorf("mergePatch(%s, %s) = %v, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
}

// The bundle's Rego tests must hold for any policy data an operator may ship,
// not only for data.json as it is: the e2e suite runs them with its own
// images and architecture. A test that hard-codes a data value fails here.
func TestBundleTestsPassWithTheE2EDataPatch(t *testing.T) {
	t.Parallel()
	dir := copyBundleDir(t, ".")
	dataPath := filepath.Join(dir, "data.json")
	data := readJSON(t, dataPath)
	patched := mergePatch(data, readJSON(t, e2eDataPatch))
	if reflect.DeepEqual(patched, data) {
		t.Fatalf("%s changes nothing in data.json", e2eDataPatch)
	}
	b, err := json.Marshal(patched)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dataPath, string(b))

	results, err := RunTests(context.Background(), os.DirFS(dir))
	var failed []string
	for _, r := range results {
		if !r.Pass {
			failed = append(failed, r.Package+"."+r.Name+errorSuffix(r.Error))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("with %s applied, %d of %d bundle tests fail:\n  %s",
			e2eDataPatch, len(failed), len(results), strings.Join(failed, "\n  "))
	}
	if err != nil {
		t.Fatalf("with %s applied: %v", e2eDataPatch, err)
	}
}

func errorSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}

// copyBundleDir copies the bundle files of src on disk (.manifest, data.json
// and every .rego file, tests included) into a temp dir and returns it.
func copyBundleDir(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	fsys := os.DirFS(src)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if name := path.Base(p); p != ".manifest" && p != "data.json" && path.Ext(name) != ".rego" {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func readJSON(t *testing.T, p string) any {
	t.Helper()
	b, err := os.ReadFile(p) //nolint:gosec // test fixtures at fixed paths
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return v
}
