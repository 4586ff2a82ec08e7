package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/gateway/client"
)

// fakeAPI is a gateway double speaking docs/api.md, for the answers a
// real gateway on the simulator does not give on demand (a sandbox that
// stays starting, a failed placement, truncated output, a lost stream).
type fakeAPI struct {
	create  string       // the POST /v1/sandboxes answer
	gets    []string     // GET /v1/sandboxes/{id} answers, the last one repeats
	exec    string       // the exec answer
	getN    atomic.Int32 // GETs served
	mu      sync.Mutex
	created map[string]any // the last create body
}

func (f *fakeAPI) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes":
			f.mu.Lock()
			_ = json.Unmarshal(body, &f.created)
			f.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, f.create)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/"):
			n := int(f.getN.Add(1))
			_, _ = io.WriteString(w, f.gets[min(n, len(f.gets))-1])
		case strings.HasSuffix(r.URL.Path, "/exec"):
			_, _ = io.WriteString(w, f.exec)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func fakeSandbox(state, extra string) string {
	return `{"id":"sbx1","state":"` + state + `","node":"worker-1","profile":"strict","network":"none","image":"ubuntu:24.04",
	  "cpu_mhz":500,"memory_mb":512,"principal":"op","created_at":"2026-11-29T10:00:00Z","expires_at":"2026-11-29T11:00:00Z",
	  "ceiling_at":"2026-11-29T14:00:00Z","labels":{}` + extra + `}`
}

// A create answered "starting" is polled until it runs; the token of the
// create answer is printed, though GET never shows it.
func TestCreatePollsAStartingSandboxUntilItRuns(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{create: fakeSandbox("starting", `,"token":"eyJ.session"`),
		gets: []string{fakeSandbox("starting", ""), fakeSandbox("running", "")}}
	addr := f.serve(t)
	code, out, stderr := runCLI(t, "", "sandbox", "create", "--addr", addr, "--token", "op", "--wait", "30s")
	mustOK(t, code, out, stderr)
	if !regexp.MustCompile(`(?m)^state: +running$`).MatchString(out) || !regexp.MustCompile(`(?m)^token: +eyJ\.session$`).MatchString(out) {
		t.Fatalf("stdout:\n%s", out)
	}
	if f.getN.Load() != 2 {
		t.Fatalf("%d GETs, want 2 (starting, then running)", f.getN.Load())
	}
	// not a terminal: one progress line, no carriage returns
	if stderr != "creating sandbox on the least loaded enrolled node\nnote: the session token is shown only this once; keep it now\n" {
		t.Fatalf("stderr %q", stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.created["wait_seconds"] != float64(30) {
		t.Fatalf("create body %v, want wait_seconds 30", f.created)
	}
}

func TestCreateExits1WhenTheSandboxFailsOrKeepsStarting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		api        *fakeAPI
		args       []string
		wantOut    []string
		wantErr    string
		wantWaitSS float64
	}{
		{name: "a failed placement shows why and no token",
			api:  &fakeAPI{create: fakeSandbox("failed", `,"last_error":"missing driver docker","end_reason":"placement_failed"`)},
			args: []string{"--wait", "10m"}, wantOut: []string{"state:", "failed", "last error:", "missing driver docker"},
			wantErr: "sandgate: sandbox sbx1 failed: missing driver docker\n", wantWaitSS: 120},
		{name: "a sandbox still starting after --wait is printed with its token",
			api:  &fakeAPI{create: fakeSandbox("starting", `,"token":"eyJ.s"`), gets: []string{fakeSandbox("starting", "")}},
			args: []string{"--wait", "1s"}, wantOut: []string{"starting", "token:", "eyJ.s"},
			wantErr: "sandgate: sandbox sbx1 is still starting after 1s", wantWaitSS: 1},
		// Polled at least once (every second) before --wait ran out: the GET
		// answer has no token, the create answer's must still be printed.
		{name: "a sandbox still starting after polls is printed with the create's token",
			api:  &fakeAPI{create: fakeSandbox("starting", `,"token":"eyJ.s"`), gets: []string{fakeSandbox("starting", ""), fakeSandbox("starting", "")}},
			args: []string{"--wait", "2500ms"}, wantOut: []string{"starting", "token:", "eyJ.s"},
			wantErr: "sandgate: sandbox sbx1 is still starting after 2.5s", wantWaitSS: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tc.api.serve(t)
			args := append([]string{"sandbox", "create", "--addr", addr, "--token", "op"}, tc.args...)
			code, out, stderr := runCLI(t, "", args...)
			if code != exitError || !strings.Contains(stderr, tc.wantErr) {
				t.Fatalf("exit %d\nstderr %q", code, stderr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "token:") != strings.Contains(tc.api.create, "token") {
				t.Errorf("token shown wrongly:\n%s", out)
			}
			tc.api.mu.Lock()
			defer tc.api.mu.Unlock()
			if tc.api.created["wait_seconds"] != tc.wantWaitSS {
				t.Errorf("wait_seconds %v, want %v", tc.api.created["wait_seconds"], tc.wantWaitSS)
			}
		})
	}
}

func TestExecSaysWhatWasCutAndHowItEnded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, answer      string
		wantCode          int
		wantOut, wantErrs string
	}{
		{name: "truncated output is said on stderr",
			answer:   `{"exit_code":0,"stdout":"aaaaa","stderr":"","stdout_bytes":100000,"stdout_truncated":true,"truncated":true}`,
			wantCode: exitOK, wantOut: "aaaaa", wantErrs: "sandgate: stdout truncated: 5 of 100000 bytes shown\n"},
		{name: "a timeout exits with the command's status and says so",
			answer:   `{"exit_code":143,"stdout":"","stderr":"","timed_out":true,"duration_ms":5000}`,
			wantCode: 143, wantErrs: "sandgate: the command timed out after 5s\n"},
		{name: "a lost stream has no exit status and exits 1",
			answer:   `{"exit_code":null,"stdout":"partial","stderr":"","timed_out":true,"duration_ms":130000}`,
			wantCode: exitError, wantOut: "partial", wantErrs: "sandgate: the command timed out after 2m10s\nsandgate: the command's exit status is unknown: the gateway gave up on its stream after the timeout\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := (&fakeAPI{exec: tc.answer}).serve(t)
			code, out, stderr := runCLI(t, "", "sandbox", "exec", "--addr", addr, "--token", "op", "sbx1", "--", "yes")
			if code != tc.wantCode || out != tc.wantOut || stderr != tc.wantErrs {
				t.Fatalf("exit %d stdout %q stderr %q", code, out, stderr)
			}
		})
	}
}

func TestCommandLineMistakesAreRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"exec without a command", []string{"sandbox", "exec", "sbx1"}, "give a sandbox ID and a command"},
		{"exec with two words before --", []string{"sandbox", "exec", "sbx1", "extra", "--", "ls"}, "one sandbox ID before --"},
		{"a label without =", []string{"sandbox", "create", "--label", "task"}, `--label "task": want KEY=VALUE`},
		{"an env given twice", []string{"sandbox", "exec", "--env", "A=1", "--env", "A=2", "x", "--", "env"}, `--env: "A" given twice`},
		{"an output format that does not exist", []string{"sandbox", "list", "-o", "yaml"}, "must be table, wide or json"},
		{"extend without --ttl", []string{"sandbox", "extend", "sbx1"}, "--ttl is required"},
		{"logs of an unknown stream", []string{"sandbox", "logs", "sbx1", "--stream", "stdin"}, "--stream must be stdout or stderr"},
		{"an address without a scheme", []string{"sandbox", "list", "--addr", "127.0.0.1:8080"}, "is not a URL like http://"},
		{"an address of another scheme", []string{"sandbox", "list", "--addr", "ftp://gw"}, "must start with http:// or https://"},
		{"a stdin file that does not exist", []string{"sandbox", "exec", "--stdin-file", "/nonexistent/in", "x", "--", "cat"}, "--stdin-file"},
		{"a misspelt flag", []string{"sandbox", "create", "--profle", "strict"}, "unknown flag: --profle (did you mean --profile?)"},
		{"a flag like no other", []string{"sandbox", "create", "--zzzzzz"}, "(see: sandgate sandbox create --help)"},
		{"a misspelt subcommand", []string{"sandbox", "cpy", "a", "b"}, `unknown command "cpy" for "sandgate sandbox" (did you mean cp?)`},
		{"a subcommand like no other", []string{"host", "zzzzzz"}, `unknown command "zzzzzz" for "sandgate host" (see: sandgate host --help)`},
		{"cp with one path", []string{"sandbox", "cp", "sbx1:/workspace/a"}, "accepts 2 arg(s), received 1"},
		{"ls of a path without its sandbox", []string{"sandbox", "ls", "/workspace"}, `"/workspace" is not ID:/path`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(tc.args, "--token", "op")
			if !strings.Contains(strings.Join(tc.args, " "), "--addr") {
				args = append([]string{"--addr", closedAddr(t)}, args...)
			}
			code, out, stderr := runCLI(t, "", args...)
			if code != exitError || out != "" || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "no answer") {
				t.Fatalf("exit %d stdout %q stderr %q, want %q", code, out, stderr, tc.want)
			}
		})
	}
}

func TestProblemsPrintStatusCodeDetailRulesAndDecision(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		p    client.Problem
		want string
	}{
		{"a denial with one violation", client.Problem{Status: 403, Code: "policy_denied", Detail: "T2: bound to another sandbox",
			RuleIDs: []string{"T2"}, Violations: []client.Violation{{Rule: "T2", Msg: "bound to another sandbox"}}, DecisionID: "d1"},
			"403 policy_denied: T2: bound to another sandbox\nrules: T2\ndecision: d1"},
		{"violations the detail lacks are listed", client.Problem{Status: 403, Code: "policy_denied", Detail: "H1: privileged",
			RuleIDs: []string{"H1", "H5"}, Violations: []client.Violation{{Rule: "H1", Msg: "privileged"}, {Rule: "H5", Msg: "docker socket"}}},
			"403 policy_denied: H1: privileged\nrules: H1, H5\n  H5: docker socket"},
		{"a 400 names its field", client.Problem{Status: 400, Code: "invalid_request", Detail: "ttl_seconds: is required", Field: "ttl_seconds"},
			"400 invalid_request: ttl_seconds: is required\nfield: ttl_seconds"},
		{"a full budget says when to retry", client.Problem{Status: 429, Code: "budget_exhausted", Detail: "B1: full", RuleIDs: []string{"B1"}, RetryAfter: 5 * time.Second},
			"429 budget_exhausted: B1: full\nrules: B1\nretry after: 5s"},
		{"a 401 hints at the token", client.Problem{Status: 401, Code: "token_expired", Detail: "the token has expired"},
			"401 token_expired: the token has expired\nhint: check --token, --token-file or SANDGATE_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			if got := (&problemError{p: &p}).Error(); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// On a terminal the line is redrawn in place with the elapsed seconds and
// cleared at the end; elsewhere it is one line, once.
func TestProgressRedrawsOnATerminalAndWritesOneLineElsewhere(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var elapsed atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }

	var tty bytes.Buffer
	tick := make(chan time.Time)
	p := newProgress(&tty, "creating sandbox on worker-1", true, tick, clock)
	elapsed.Store(int64(3 * time.Second))
	p.set("waiting for sandbox sbx1 on worker-1 to run")
	tick <- time.Time{}
	p.finish()
	p.finish() // twice is harmless
	want := "\r\033[Kcreating sandbox on worker-1 0s" + "\r\033[Kwaiting for sandbox sbx1 on worker-1 to run 3s" + "\r\033[K"
	if tty.String() != want {
		t.Fatalf("terminal output %q, want %q", tty.String(), want)
	}

	var pipe bytes.Buffer
	p = newProgress(&pipe, "creating sandbox on worker-1", false, nil, clock)
	p.set("waiting")
	p.finish()
	if pipe.String() != "creating sandbox on worker-1\n" {
		t.Fatalf("pipe output %q", pipe.String())
	}
	if isTerminal(&pipe) {
		t.Fatal("a buffer is not a terminal")
	}
}
