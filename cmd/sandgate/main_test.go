package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sandgate/gateway"
	"sandgate/gateway/client"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/replay"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/policies/policytest"
)

// runCLI runs the CLI in-process and returns its exit code and outputs.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRenderedAdmissionInputReplaysAsAllowedAndTamperedAsDeniedByH1(t *testing.T) {
	t.Parallel()
	code, doc, stderr := runCLI(t, "", "render", "--node", "w1", "--admission-input")
	if code != exitOK {
		t.Fatalf("render exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI(t, doc, "policy", "eval", "--entrypoint", "admission", "--input", "-")
	if code != exitOK {
		t.Fatalf("eval of the rendered input: exit %d, want 0\n%s%s", code, out, stderr)
	}
	var allowed evalOutput
	if err := json.Unmarshal([]byte(out), &allowed); err != nil {
		t.Fatal(err)
	}
	if !allowed.Allow || allowed.Revision == "" || allowed.DecisionID == "" {
		t.Fatalf("eval output %+v", allowed)
	}

	var in map[string]any
	if err := json.Unmarshal([]byte(doc), &in); err != nil {
		t.Fatal(err)
	}
	cfg := in["job"].(map[string]any)["TaskGroups"].([]any)[0].(map[string]any)["Tasks"].([]any)[0].(map[string]any)["Config"].(map[string]any)
	cfg["privileged"] = true
	tampered, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "", "policy", "eval", "--entrypoint", "admission", "--input", path)
	if code != exitDenied {
		t.Fatalf("eval of a privileged job: exit %d, want 3\n%s", code, out)
	}
	var denied evalOutput
	if err := json.Unmarshal([]byte(out), &denied); err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, v := range denied.Violations {
		rules = append(rules, v.Rule)
	}
	if denied.Allow || !slices.Equal(rules, []string{"H1"}) {
		t.Fatalf("privileged job: %+v, want a deny naming only H1", denied)
	}
}

// lifecycleReap is the reaper's input for a sandbox one second past expiry.
const lifecycleReap = `{"now":1764409601,"action":"end","reason":"expired",
 "job":{"id":"sandgate-sbx-k7x2m9p4q8r5t1v6","present":true},
 "sandbox":{"id":"k7x2m9p4q8r5t1v6","job_id":"sandgate-sbx-k7x2m9p4q8r5t1v6","state":"running","expires_at":1764409600,"ceiling_at":1764420400},
 "effects":{"purge_job":true,"revoke_token":true,"release_budget":true}}`

func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  int
	}{
		{"an empty input document is denied", `{}`, []string{"policy", "eval", "--entrypoint", "authz", "--input", "-"}, exitDenied},
		{"malformed JSON is an error", `{"now":`, []string{"policy", "eval", "--entrypoint", "authz", "--input", "-"}, exitError},
		{"an array is an error", `[]`, []string{"policy", "eval", "--entrypoint", "admission", "--input", "-"}, exitError},
		{"a due reap is allowed", lifecycleReap, []string{"policy", "eval", "--entrypoint", "lifecycle", "--input", "-"}, exitOK},
		{"purging a foreign job is denied", `{"now":1,"action":"purge","reason":"orphan","job":{"id":"billing","present":true},"effects":{"purge_job":true,"revoke_token":false,"release_budget":false}}`,
			[]string{"policy", "eval", "--entrypoint", "lifecycle", "--input", "-"}, exitDenied},
		{"an unknown entrypoint is an error", `{}`, []string{"policy", "eval", "--entrypoint", "nomad", "--input", "-"}, exitError},
		{"a missing input file is an error", ``, []string{"policy", "eval", "--entrypoint", "authz", "--input", "/nonexistent/in.json"}, exitError},
		{"render without a node is an error", ``, []string{"render"}, exitError},
		{"render of an unknown profile is an error naming the field", ``, []string{"render", "--node", "w1", "--profile", "root"}, exitError},
		{"a policy dir that does not exist is an error", ``, []string{"policy", "info", "--policy-dir", "/nonexistent"}, exitError},
		{"policy info", ``, []string{"policy", "info"}, exitOK},
		{"policy info in JSON", ``, []string{"policy", "info", "--format", "json"}, exitOK},
		{"policy info in an unknown format", ``, []string{"policy", "info", "--format", "yaml"}, exitError},
		{"the demo", ``, []string{"demo"}, exitOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runCLI(t, c.stdin, c.args...)
			if code != c.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.want, out, stderr)
			}
			if c.want == exitError && stderr == "" {
				t.Fatal("an error exit printed nothing on stderr")
			}
		})
	}
}

func TestRenderErrorsNameTheField(t *testing.T) {
	t.Parallel()
	_, _, stderr := runCLI(t, "", "render", "--node", "w1", "--profile", "root")
	if !strings.Contains(stderr, `"profile"`) {
		t.Fatalf("stderr %q does not name the profile field", stderr)
	}
}

func TestTheDemoSaysTheClusterIsSimulated(t *testing.T) {
	t.Parallel()
	_, out, _ := runCLI(t, "", "demo")
	for _, want := range []string{"SIMULATED CLUSTER", "ADMITTED", "DENIED   [H1]", "DENIED   [H5]", "DENIED   [I5]"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// `sandgate policy test` runs a bundle's Rego tests and fails when one
// fails. A copy with one small test per entrypoint keeps it quick: the
// embedded bundle's own tests run in package policies and in `opa test`.
func TestPolicyTestRunsTheBundleTests(t *testing.T) {
	t.Parallel()
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	code, out, stderr := runCLI(t, "", "policy", "test", "--policy-dir", dir)
	if code != exitOK || !strings.Contains(out, " passed, 0 failed") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz", "zz_test.rego"), []byte("package sandgate.authz_test\n\ntest_fails if false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "", "policy", "test", "--policy-dir", dir)
	if code == exitOK || !strings.Contains(out+stderr, "test_fails") {
		t.Fatalf("a failing test: exit %d\n%s%s", code, out, stderr)
	}
}

// The rule table in docs/policies.md is generated by `sandgate policy info
// --format markdown` (make docs); this keeps it true.
func TestDocsPoliciesCarriesTheCurrentRuleTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/policies.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- rule-table:begin -->\n", "<!-- rule-table:end -->"
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatal("docs/policies.md has no rule-table markers")
	}
	_, want, _ := runCLI(t, "", "policy", "info", "--format", "markdown")
	if got := s[i+len(begin) : j]; got != want {
		t.Fatalf("docs/policies.md's rule table is stale; run `make docs`.\n got:\n%s\nwant:\n%s", got, want)
	}
}

// TestMain clears the NOMAD_* variables: these are unit tests of the CLI on
// the simulator (dev, render without a cluster). A developer who exported
// NOMAD_ADDR for test/integration must not send them to a real cluster.
func TestMain(m *testing.M) {
	// A gateway this binary runs (dev) replays candidates in a worker:
	// this binary again, with the hidden subcommand's arguments.
	if replay.IsWorker(os.Args[1:]) {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "NOMAD_") || strings.HasPrefix(name, "SANDGATE_") {
			_ = os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}

// `policy info` prints the digest GET /v1/policy reports, for the
// embedded bundle and for the same files on disk alike.
func TestPolicyInfoPrintsTheBundleDigest(t *testing.T) {
	t.Parallel()
	want, err := policies.BundleDigest(policies.EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"policy", "info", "--format", "json"}, {"policy", "info", "--format", "json", "--policy-dir", "../../policies"}} {
		code, out, stderr := runCLI(t, "", args...)
		var doc struct {
			Digest          string `json:"digest"`
			DigestAlgorithm string `json:"digest_algorithm"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		if doc.Digest != want || doc.DigestAlgorithm != policies.DigestAlgorithm {
			t.Errorf("%v: digest %q (%s), want %q (%s)", args, doc.Digest, doc.DigestAlgorithm, want, policies.DigestAlgorithm)
		}
	}
}

// `policy audit` passes the shipped bundle and exits 3, listing what it
// admits, for one that sets H1 to dryrun.
func TestPolicyAuditExitsThreeOnABundleThatAdmitsPrivileged(t *testing.T) {
	t.Parallel()
	if code, out, stderr := runCLI(t, "", "policy", "audit"); code != exitOK || !strings.Contains(out, "0 admitted") {
		t.Fatalf("the shipped bundle: exit %d\n%s%s", code, out, stderr)
	}
	found := false
	dir := policytest.EditFile(t, policytest.Copy(t, policies.EmbeddedBundle(), nil), "data.json", func(b []byte) []byte {
		found = strings.Contains(string(b), `"enforcement": {}`)
		return []byte(strings.Replace(string(b), `"enforcement": {}`, `"enforcement": {"H1": "dryrun"}`, 1))
	}, &found)
	code, out, stderr := runCLI(t, "", "policy", "audit", "--policy-dir", dir, "--format", "json")
	var doc struct {
		Admitted int `json:"admitted"`
		Cases    []struct {
			ID       string `json:"id"`
			Admitted bool   `json:"admitted"`
		} `json:"cases"`
	}
	if code != exitDenied || json.Unmarshal([]byte(out), &doc) != nil || doc.Admitted == 0 {
		t.Fatalf("the loosened bundle: exit %d\n%s%s", code, out, stderr)
	}
	for _, c := range doc.Cases {
		if c.ID == "job/privileged-true" && !c.Admitted {
			t.Fatalf("job/privileged-true is not listed as admitted: %s", out)
		}
	}
}

// The attack of issue 21 through the CLI: a data.yml adds a builder
// profile with SYS_ADMIN. `policy info` reports another digest than the
// reviewed bundle's (the revision is the same), and `policy audit` exits 3
// naming the profile and the capability.
func TestPolicyAuditAndInfoCatchABuilderProfileInDataYML(t *testing.T) {
	t.Parallel()
	reviewed, err := policies.BundleDigest(policies.EmbeddedBundle())
	if err != nil {
		t.Fatal(err)
	}
	dir := policytest.Copy(t, policies.EmbeddedBundle(), nil)
	policytest.AddBuilderProfile(t, dir)
	code, out, stderr := runCLI(t, "", "policy", "info", "--format", "json", "--policy-dir", dir)
	var info struct {
		Digest string `json:"digest"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &info) != nil || info.Digest == "" || info.Digest == reviewed {
		t.Fatalf("policy info of the bundle with a builder profile: exit %d, digest %q (the reviewed one is %s)\n%s", code, info.Digest, reviewed, stderr)
	}
	code, out, stderr = runCLI(t, "", "policy", "audit", "--policy-dir", dir)
	if code != exitDenied || !regexp.MustCompile(`(?m)^profile/builder/adds-SYS_ADMIN\s+H1\s+ADMITTED$`).MatchString(out) {
		t.Fatalf("policy audit of the bundle with a builder profile: exit %d\n%s%s", code, out, stderr)
	}
}

// `policy replay` exits 0 when the candidate is the bundle that decided,
// and 3, listing the flip, when it frees a logged refusal.
func TestPolicyReplayExitsThreeOnALoosening(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.New(t, gatewaytest.Options{Config: func(c *gateway.Config) { c.LogInputs = true }})
	cl, err := client.New(client.Config{Addr: gw.URL, Token: gw.Mint(token.RoleAgent, "ci")})
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := cl.CreateSandbox(t.Context(), client.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.New(client.Config{Addr: gw.URL, Token: sbx.Token})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Exec(t.Context(), sbx.ID, client.ExecRequest{Argv: []string{"sleep", "1"}, TimeoutSeconds: new(int64(600))}); err == nil {
		t.Fatal("an exec past the timeout bound was allowed")
	}
	log := filepath.Join(gw.DataDir, gatewaytest.DecisionLogFile)
	if code, out, stderr := runCLI(t, "", "policy", "replay", "--candidate", "../../policies", "--log", log); code != exitOK || !strings.Contains(out, "no decision flips") {
		t.Fatalf("replay under the same bundle: exit %d\n%s%s", code, out, stderr)
	}
	loose := policytest.Copy(t, policies.EmbeddedBundle(), func(p string, b []byte) ([]byte, error) {
		if p == "data.json" {
			return []byte(strings.Replace(string(b), `"max_timeout_seconds": 120`, `"max_timeout_seconds": 86400`, 1)), nil
		}
		return b, nil
	})
	code, out, stderr := runCLI(t, "", "policy", "replay", "--candidate", loose, "--log", log)
	if code != exitDenied || !regexp.MustCompile(`deny_to_allow\s+E2\s+1`).MatchString(out) {
		t.Fatalf("replay under a loosened bundle: exit %d\n%s%s", code, out, stderr)
	}
}

// `policy eval --request` asks a gateway what it would decide.
func TestPolicyEvalRequestDryRunsOnTheGateway(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.New(t, gatewaytest.Options{})
	op := gw.Mint(token.RoleOperator, "ops")
	req := `{"method": "GET", "path": "/v1/sandboxes", "token_claims": {"role": "session", "sub": "session:k7x2m9p4q8r5t1v6", "sandbox_id": "k7x2m9p4q8r5t1v6"}}`
	code, out, stderr := runCLI(t, req, "policy", "eval", "--request", "-", "--addr", gw.URL, "--token", op)
	var ev struct {
		Allow   bool     `json:"allow"`
		RuleIDs []string `json:"rule_ids"`
		DryRun  bool     `json:"dry_run"`
		Input   struct {
			Request struct {
				Route string `json:"route"`
			} `json:"request"`
		} `json:"input"`
	}
	if code != exitDenied || json.Unmarshal([]byte(out), &ev) != nil || ev.Allow || !ev.DryRun ||
		!slices.Equal(ev.RuleIDs, []string{"T2"}) || ev.Input.Request.Route != "/v1/sandboxes" {
		t.Fatalf("a session token listing, dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := runCLI(t, req, "policy", "eval", "--request", "-", "--entrypoint", "authz", "--addr", gw.URL, "--token", op); code != exitError || !strings.Contains(stderr, "takes no --entrypoint") {
		t.Fatalf("--request with --entrypoint: exit %d %s", code, stderr)
	}
}

// A taken port fails `sandgate dev` before it writes anything, and the
// message says how to choose another address.
func TestDevOnATakenPortWritesNothingAndNamesListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	code, _, stderr := runCLI(t, "", "dev", "--listen", ln.Addr().String(), "--data", data)
	if code == 0 || !strings.Contains(stderr, "address already in use") || !strings.Contains(stderr, "--listen") || !strings.Contains(stderr, "RUN_ARGS") {
		t.Fatalf("dev on a taken port: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("dev on a taken port left %s behind (stat: %v)", data, err)
	}
}
