package policies

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// testKey is a signing key pair as PEM.
type testKey struct{ private, public string }

func rsaKey(t *testing.T) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pemPair(t, k, &k.PublicKey)
}

func ecKey(t *testing.T) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pemPair(t, k, &k.PublicKey)
}

func pemPair(t *testing.T, private, public any) testKey {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(private)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{
		private: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		public:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
}

// buildBundle builds the bundle in dir into a file, signed with key unless
// key is empty, and returns the file.
func buildBundle(t *testing.T, dir, rev string, key testKey, keyID string) (string, BuildResult) {
	t.Helper()
	var buf bytes.Buffer
	res, err := Build(context.Background(), BuildOptions{Dir: dir, Revision: rev, SigningKeyPEM: key.private, KeyID: keyID}, &buf)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	file := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, res
}

// rewriteTarball copies a bundle tarball, passing each file through edit
// (which returns the new bytes, or nil to drop the file).
func rewriteTarball(t *testing.T, file string, edit func(name string, b []byte) []byte) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files, err := untarBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for name, f := range files {
		b := edit(name, f.Data)
		if b == nil {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "edited.tar.gz")
	if err := os.WriteFile(name, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestASignedBundleServesAndNamesItsSigner(t *testing.T) {
	t.Parallel()
	dir := copyBundleWithSmallTests(t)
	for name, key := range map[string]testKey{"rsa": rsaKey(t), "ecdsa": ecKey(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file, res := buildBundle(t, dir, "signed-"+name, key, "reviewers-2026")
			if !res.Signed || res.KeyID != "reviewers-2026" || res.Revision != "signed-"+name {
				t.Fatalf("build result = %+v", res)
			}
			e, err := New(context.Background(), Config{BundleFile: file, VerifyTests: true,
				Verify: &Verification{KeyPEM: key.public, KeyID: "reviewers-2026"}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			info := e.Info()
			if info.Revision != "signed-"+name || info.Signer != "reviewers-2026" || info.Digest != res.Digest {
				t.Fatalf("Info = %+v, want revision signed-%s, signer reviewers-2026, digest %s", info, name, res.Digest)
			}
			d, err := e.Decide(context.Background(), Authz, ast.NewObject())
			if err != nil || d.Allow || d.Revision != "signed-"+name {
				t.Fatalf("decision of the signed bundle: %+v, %v", d, err)
			}
		})
	}
}

func TestBundleFilesThatMustNotServe(t *testing.T) {
	t.Parallel()
	dir := copyBundleWithSmallTests(t)
	key, other := ecKey(t), ecKey(t)
	signed, _ := buildBundle(t, dir, "signed-1", key, "")
	unsigned, _ := buildBundle(t, dir, "unsigned-1", testKey{}, "")
	tampered := rewriteTarball(t, signed, func(name string, b []byte) []byte {
		if name == "authz/authz.rego" {
			return append(b, []byte("\n# an innocent-looking comment\n")...)
		}
		return b
	})
	injected := rewriteTarball(t, signed, func(name string, b []byte) []byte {
		if name == "authz/authz.rego" {
			const decision = `decision := modes.decision(violations)`
			if !bytes.Contains(b, []byte(decision)) {
				t.Fatalf("authz.rego has no %s to tamper with", decision)
			}
			return bytes.Replace(b, []byte(decision), []byte(`decision := {"allow": true, "violations": set()}`), 1)
		}
		return b
	})
	stripped := rewriteTarball(t, signed, func(name string, b []byte) []byte {
		if name == ".signatures.json" {
			return nil
		}
		return b
	})
	cases := []struct {
		name    string
		file    string
		verify  *Verification
		wantErr error
	}{
		{"unsigned", unsigned, &Verification{KeyPEM: key.public}, ErrUnsigned},
		{"signature stripped", stripped, &Verification{KeyPEM: key.public}, ErrUnsigned},
		{"a comment added after signing", tampered, &Verification{KeyPEM: key.public}, ErrSignature},
		{"allow rewritten after signing", injected, &Verification{KeyPEM: key.public}, ErrSignature},
		{"signed by another key", signed, &Verification{KeyPEM: other.public}, ErrSignature},
		{"signed under another key id", signed, &Verification{KeyPEM: key.public, KeyID: "someone-else"}, ErrSignature},
	}
	ctx := context.Background()
	serving, err := New(ctx, Config{BundleFile: signed, Verify: &Verification{KeyPEM: key.public}})
	if err != nil {
		t.Fatalf("the signed bundle: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{BundleFile: c.file, Verify: c.verify, VerifyTests: true}
			if _, err := New(ctx, cfg); !errors.Is(err, c.wantErr) {
				t.Fatalf("start: err = %v, want %v", err, c.wantErr)
			}
			if err := serving.Reload(ctx, cfg); !errors.Is(err, c.wantErr) {
				t.Fatalf("reload: err = %v, want %v", err, c.wantErr)
			}
			if got := serving.Info(); got.Revision != "signed-1" || got.Signer != DefaultKeyID {
				t.Fatalf("a refused reload changed the serving bundle: %+v", got)
			}
		})
	}
	// A private key is never a verification key.
	if _, err := New(ctx, Config{BundleFile: signed, Verify: &Verification{KeyPEM: key.private}}); err == nil {
		t.Fatal("a private key was accepted as the verification key")
	}
	// A verification key is for bundle files only: a directory cannot be signed.
	if _, err := New(ctx, Config{Dir: dir, Verify: &Verification{KeyPEM: key.public}}); err == nil {
		t.Fatal("a directory was served with a verification key")
	}
}

// TestOPAVerifiesTheSignedBundle: the signature is OPA's own format, so
// OPA's CLI verifies a bundle `sandgate policy build` signed, and refuses
// it under another key.
func TestOPAVerifiesTheSignedBundle(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run `go tool opa` with")
	}
	key, other := rsaKey(t), rsaKey(t)
	file, _ := buildBundle(t, copyBundleWithSmallTests(t), "opa-verifies", key, "")
	tmp := t.TempDir()
	pub, otherPub := filepath.Join(tmp, "pub.pem"), filepath.Join(tmp, "other.pem")
	writeFile(t, pub, key.public)
	writeFile(t, otherPub, other.public)
	opa := func(keyFile string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, "tool", "opa", "build", "--verification-key", keyFile, //nolint:gosec // G204: go tool opa on the test's own files
			"--verification-key-id", DefaultKeyID, "--bundle", file, "-o", filepath.Join(tmp, "out.tar.gz"))
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := opa(pub); err != nil {
		t.Fatalf("opa build --verification-key refused the bundle: %v\n%s", err, out)
	}
	out, err := opa(otherPub)
	if err == nil || !strings.Contains(out, "verif") {
		t.Fatalf("opa verified the bundle with another key: %v\n%s", err, out)
	}
}

func TestTheDigestOfABundleFileIsTheDigestOfItsFiles(t *testing.T) {
	t.Parallel()
	file, res := buildBundle(t, copyBundleWithSmallTests(t), "digest-1", testKey{}, "")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files, err := untarBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	want, err := BundleDigest(files)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), Config{BundleFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Info(); got.Digest != want || got.Digest != res.Digest || got.Signer != "" {
		t.Fatalf("Info = %+v, want digest %s (build said %s) and no signer", got, want, res.Digest)
	}
}

func TestUntarBundleRefusesWhatIsNotABundle(t *testing.T) {
	t.Parallel()
	tarOf := func(entries map[string]string) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		tw := tar.NewWriter(zw)
		for name, body := range entries {
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
			_, _ = io.WriteString(tw, body)
		}
		_ = tw.Close()
		_ = zw.Close()
		return out.Bytes()
	}
	for name, raw := range map[string][]byte{
		"not gzip":    []byte("plain text"),
		"no manifest": tarOf(map[string]string{"authz/authz.rego": "package x"}),
	} {
		if _, err := untarBundle(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A path that climbs out is kept inside: names are cleaned to the root.
	files, err := untarBundle(tarOf(map[string]string{".manifest": "{}", "../../etc/x.rego": "package x"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["etc/x.rego"]; !ok || len(files) != 2 {
		t.Fatalf("files = %v", files)
	}
}

// A bundle that reaches outside its input and data (the network, DNS, the
// process environment) does not compile, at start or in its tests.
func TestABundleThatReachesOutsideItsInputIsRefused(t *testing.T) {
	t.Parallel()
	for name, call := range map[string]string{
		"http.send":          `http.send({"method": "GET", "url": "http://127.0.0.1:1/"})`,
		"net.lookup_ip_addr": `net.lookup_ip_addr("localhost")`,
		"opa.runtime":        `opa.runtime()`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := copyBundleWithSmallTests(t)
			writeFile(t, filepath.Join(dir, "authz", "reach.rego"), "package sandgate.authz\n\n_reach := "+call+"\n")
			_, err := New(context.Background(), Config{Dir: dir})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("a bundle calling %s: err = %v", name, err)
			}
			// Its tests cannot call it either.
			writeFile(t, filepath.Join(dir, "authz", "reach.rego"), "package sandgate.authz_test\n\ntest_reach if "+call+"\n")
			if _, err := RunTests(context.Background(), os.DirFS(dir)); err == nil {
				t.Fatalf("a test calling %s ran", name)
			}
		})
	}
}
