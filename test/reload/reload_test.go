package reload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sandgate/nomad/nomadsim"
	"sandgate/policies"
	"sandgate/policies/policytest"
	"sandgate/test/testbin"
)

type rig struct {
	t        *testing.T
	bin, dir string
	bundle   string // the bundle file the gateway serves
	key      string // signing key file
	proc     testbin.Serve
	url      string
	operator string
}

func writeKeys(t *testing.T, dir, name string) (private, public string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	private, public = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	return private, public
}

// run runs the binary and returns its standard output; it fails the test
// when the command fails and wantFail is false.
func (r *rig) run(wantFail bool, args ...string) string {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...) //nolint:gosec // G204: the binary the test built
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if (err != nil) != wantFail {
		r.t.Fatalf("sandgate %s: err %v (want failure: %v)\n%s%s", strings.Join(args, " "), err, wantFail, out, stderr.String())
	}
	return string(out)
}

// build runs `sandgate policy build` on src into the served bundle file.
func (r *rig) build(src, rev, key string) string {
	r.t.Helper()
	args := []string{"policy", "build", "--dir", src, "--revision", rev, "-o", r.bundle}
	if key != "" {
		args = append(args, "--signing-key", key)
	}
	return r.run(false, args...)
}

type policyDoc struct {
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	Signed   bool   `json:"signed"`
	Signer   string `json:"signer"`
}

func (r *rig) get(path string) (int, []byte) {
	r.t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, r.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+r.operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (r *rig) policy() policyDoc {
	r.t.Helper()
	code, b := r.get("/v1/policy")
	var d policyDoc
	if code != http.StatusOK || json.Unmarshal(b, &d) != nil {
		r.t.Fatalf("GET /v1/policy: %d %s", code, b)
	}
	return d
}

// waitLog waits until the gateway's log has n lines holding msg.
func (r *rig) waitLog(msg string, n int) string {
	r.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var found []string
		for _, l := range strings.Split(r.proc.Log(), "\n") {
			if strings.Contains(l, msg) {
				found = append(found, l)
			}
		}
		if len(found) >= n {
			return found[n-1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("the log has no %d lines with %q:\n%s", n, msg, r.proc.Log())
	return ""
}

func TestASignedBundleIsVerifiedAtStartAndAtEveryReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, simURL := nomadsim.NewTestServer(t, nomadsim.DefaultConfig())
	r := &rig{t: t, bin: testbin.Build(t), dir: t.TempDir()}
	r.bundle = filepath.Join(r.dir, "bundle.tar.gz")
	var pub string
	r.key, pub = writeKeys(t, r.dir, "reviewers")
	otherKey, _ := writeKeys(t, r.dir, "intruder")
	src := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())

	cfg, _ := json.Marshal(map[string]any{
		"listen": "127.0.0.1:0", "data_dir": r.dir,
		"nomad":  map[string]any{"address": simURL},
		"policy": map[string]any{"bundle_file": r.bundle, "verification_key": pub},
	})
	config := filepath.Join(r.dir, "serve.json")
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	r.operator = strings.TrimSpace(r.run(false, "token", "mint", "--offline", "--role", "operator", "--subject", "reviewer-ops", "--ttl", "1h", "--data", r.dir))
	t.Cleanup(func() {
		r.proc.Signal(os.Interrupt, 20*time.Second)
		if t.Failed() {
			t.Logf("gateway log:\n%s", r.proc.Log())
		}
	})

	// An unsigned bundle never starts.
	r.build(src, "unsigned-0", "")
	cmd := exec.Command(r.bin, "serve", "--config", config) //nolint:gosec // G204: the binary the test built
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not signed") {
		t.Fatalf("serve with an unsigned bundle: err %v\n%s", err, out)
	}
	// One signed by another key neither.
	r.build(src, "intruder-0", otherKey)
	cmd = exec.Command(r.bin, "serve", "--config", config) //nolint:gosec // G204: the binary the test built
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "signature does not verify") {
		t.Fatalf("serve with a bundle signed by another key: err %v\n%s", err, out)
	}

	// The reviewers' signed bundle serves, and says so.
	out := r.build(src, "signed-1", r.key)
	if !strings.Contains(out, "signed by key id sandgate") {
		t.Fatalf("policy build: %s", out)
	}
	// A SIGHUP while the bundle still compiles neither kills the gateway
	// (Go's default for SIGHUP) nor is lost: it reloads once it listens.
	serve := exec.Command(r.bin, "serve", "--config", config) //nolint:gosec // G204: the binary the test built
	var hupSent sync.Once
	r.url = "http://" + r.proc.Start(t, serve, 60*time.Second, func(line string) {
		if strings.Contains(line, `msg="sandgate gateway starting"`) {
			hupSent.Do(func() { _ = serve.Process.Signal(syscall.SIGHUP) })
		}
	})
	if line := r.waitLog("policy bundle reloaded", 1); !strings.Contains(line, "cause=signal") || !strings.Contains(line, "bundle_revision=signed-1") {
		t.Fatalf("the SIGHUP sent at start: %s", line)
	}
	if p := r.policy(); p.Revision != "signed-1" || !p.Signed || p.Signer != "sandgate" {
		t.Fatalf("GET /v1/policy at start: %+v", p)
	}

	// A rebuilt bundle is picked up on its own.
	r.build(src, "signed-2", r.key)
	line := r.waitLog("policy bundle reloaded", 2)
	if !strings.Contains(line, "bundle_revision=signed-2") || !strings.Contains(line, "cause=file") {
		t.Fatalf("reload log line: %s", line)
	}
	t.Logf("reload: %s", line)
	served := r.policy()
	if served.Revision != "signed-2" {
		t.Fatalf("GET /v1/policy after the rebuild: %+v", served)
	}

	// A tampered file is refused; signed-2 keeps serving.
	raw, err := os.ReadFile(r.bundle)
	if err != nil {
		t.Fatal(err)
	}
	tampered := tamper(t, raw)
	tmp := r.bundle + ".tmp"
	if err := os.WriteFile(tmp, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.bundle); err != nil {
		t.Fatal(err)
	}
	line = r.waitLog("policy bundle refused", 1)
	if !strings.Contains(line, "signature does not verify") || !strings.Contains(line, "bundle_revision=signed-2") {
		t.Fatalf("refusal log line: %s", line)
	}
	if p := r.policy(); p != served {
		t.Fatalf("a refused reload changed the policy in force: %+v, was %+v", p, served)
	}
	// SIGHUP retries it, and refuses it again.
	r.proc.Send(syscall.SIGHUP)
	if line := r.waitLog("policy bundle refused", 2); !strings.Contains(line, "cause=signal") {
		t.Fatalf("SIGHUP refusal: %s", line)
	}
	// A signed bundle whose own tests fail is refused too.
	failing := policytest.Copy(t, os.DirFS(src), nil)
	if err := os.WriteFile(filepath.Join(failing, "authz", "zz_test.rego"), []byte("package sandgate.authz_test\n\ntest_fails if false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.build2(failing, "failing-3")
	if line := r.waitLog("policy bundle refused", 3); !strings.Contains(line, "tests failed") {
		t.Fatalf("a failing bundle's refusal: %s", line)
	}
	if p := r.policy(); p != served {
		t.Fatalf("a bundle whose tests fail replaced the policy in force: %+v", p)
	}
	// The good one again, on SIGHUP.
	r.build(src, "signed-4", r.key)
	r.waitLog("policy bundle reloaded", 3)
	if p := r.policy(); p.Revision != "signed-4" {
		t.Fatalf("after the last rebuild: %+v", p)
	}
	code, metrics := r.get("/metrics")
	for _, want := range []string{`sandgate_policy_reloads_total{cause="file",result="applied"} 2`, `sandgate_policy_reloads_total{cause="signal",result="refused"} 1`, `sandgate_policy_reloads_total{cause="signal",result="applied"} 1`} {
		if code != http.StatusOK || !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// build2 packs a bundle whose tests fail as the reviewers' key signs it:
// `sandgate policy build` refuses such a directory, so the tarball is
// written by OPA's own builder, as a careless reviewer might.
func (r *rig) build2(dir, rev string) {
	r.t.Helper()
	_, file, _, _ := runtimeCaller()
	cmd := exec.Command("go", "tool", "opa", "build", "--bundle", dir, "--revision", rev, "--signing-key", r.key, //nolint:gosec // G204: the test's own files
		"--signing-alg", "ES256", "--verification-key-id", "sandgate", "-o", r.bundle+".opa")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("opa build: %v\n%s", err, out)
	}
	if err := os.Rename(r.bundle+".opa", r.bundle); err != nil {
		r.t.Fatal(err)
	}
}

func runtimeCaller() (uintptr, string, int, bool) { return runtime.Caller(1) }

// tamper re-packs a bundle tarball with one comment added to authz.rego,
// its signature kept.
func tamper(t *testing.T, raw []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	changed := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(h.Name, "authz/authz.rego") {
			b = append(b, "\n# harmless, surely\n"...)
			changed = true
		}
		h.Size = int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if !changed {
		t.Fatal("the bundle has no authz/authz.rego to tamper with")
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
