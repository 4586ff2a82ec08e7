package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/client"
)

// One sandbox through every sandbox subcommand, against a real gateway on
// the simulator: create, list, get, exec (exit codes mirrored), logs,
// extend, destroy.
func TestTheSandboxCommandsDriveOneSandboxFromCreateToDestroy(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	op := g.operator

	// create -o json: the object with its session token, nothing else on stdout
	code, out, stderr := g.cli(t, op, "sandbox", "create", "--label", "task=demo", "--ttl", "30m", "-o", "json")
	sbx := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	if sbx.State != client.StateRunning || sbx.Token == "" || sbx.Labels["task"] != "demo" || sbx.Node == "" {
		t.Fatalf("created %+v", sbx)
	}
	if !strings.Contains(stderr, "creating sandbox on the least loaded enrolled node") {
		t.Fatalf("no progress line on stderr: %q", stderr)
	}
	id := sbx.ID

	// create as a table: the fields, the token line, the note
	code, out, stderr = g.cli(t, op, "sandbox", "create", "--profile", "workspace")
	mustOK(t, code, out, stderr)
	if !regexp.MustCompile(`(?m)^state: +running$`).MatchString(out) || !regexp.MustCompile(`(?m)^token: +eyJ\S+$`).MatchString(out) ||
		!strings.Contains(stderr, "shown only this once") {
		t.Fatalf("create table:\n%s\nstderr: %s", out, stderr)
	}

	// list, as a table and as JSON
	code, out, stderr = g.cli(t, op, "sandbox", "list")
	mustOK(t, code, out, stderr)
	if !strings.HasPrefix(out, "ID ") || !strings.Contains(out, id) || !strings.Contains(out, " strict/none ") || strings.Count(out, "\n") != 3 {
		t.Fatalf("list table:\n%s", out)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "list", "-o", "wide")
	if mustOK(t, code, out, stderr); !strings.Contains(out, "task=demo") || !strings.Contains(out, " LABELS\n") {
		t.Fatalf("list -o wide:\n%s", out)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "list", "-o", "json")
	list := decodeJSON[struct{ Sandboxes []client.Sandbox }](t, mustOK(t, code, out, stderr))
	if len(list.Sandboxes) != 2 || strings.Contains(out, "eyJ") {
		t.Fatalf("list json: %s", out)
	}

	// get: the record, never the token
	code, out, stderr = g.cli(t, op, "sandbox", "get", id, "-o", "json")
	got := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	if got.ID != id || got.Token != "" || got.ExpiresAt != sbx.ExpiresAt {
		t.Fatalf("get: %+v", got)
	}

	// exec: output and exit status become the CLI's
	code, out, stderr = g.cli(t, op, "sandbox", "exec", id, "--", "echo", "hi")
	if code != exitOK || out != "hi\n" || stderr != "" {
		t.Fatalf("exec echo hi: exit %d stdout %q stderr %q", code, out, stderr)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "exec", id, "--", "sh", "-c", "echo oops >&2; exit 7")
	if code != 7 || out != "" || !strings.HasPrefix(stderr, "oops\n") {
		t.Fatalf("exec exit 7: exit %d stdout %q stderr %q", code, out, stderr)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "exec", id, "-o", "json", "--", "sh", "-c", "exit 3")
	res := decodeJSON[client.ExecResult](t, mustOK(t, code, out, stderr))
	if res.ExitCode == nil || *res.ExitCode != 3 {
		t.Fatalf("exec -o json: %s", out)
	}
	code, out, stderr = g.cliIn(t, "from stdin\n", op, "sandbox", "exec", id, "--stdin-file", "-", "--env", "GREETING=hello", "--", "cat")
	if code != exitOK || out != "from stdin\n" {
		t.Fatalf("exec cat with stdin: exit %d stdout %q stderr %q", code, out, stderr)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "exec", id, "--env", "GREETING=hello", "--", "env")
	if code != exitOK || !strings.Contains(out, "GREETING=hello\n") {
		t.Fatalf("exec env: exit %d stdout %q stderr %q", code, out, stderr)
	}

	// logs: the task's stdout, raw
	code, out, stderr = g.cli(t, op, "sandbox", "logs", id, "--stream", "stdout", "--tail", "4096")
	if mustOK(t, code, out, stderr); !strings.Contains(out, "task started") {
		t.Fatalf("logs: %q", out)
	}

	// extend: a later expiry, not past the ceiling
	code, out, stderr = g.cli(t, op, "sandbox", "extend", id, "--ttl", "2h", "-o", "json")
	ext := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	before, _ := time.Parse(time.RFC3339, sbx.ExpiresAt)
	after, err := time.Parse(time.RFC3339, ext.ExpiresAt)
	if err != nil || !after.After(before) || ext.Clamped == nil || *ext.Clamped {
		t.Fatalf("extend: %+v (was %s)", ext, sbx.ExpiresAt)
	}

	// destroy, then the sandbox is ended, and listed only with --all
	code, out, stderr = g.cli(t, op, "sandbox", "destroy", id)
	if mustOK(t, code, out, stderr); out != "destroyed sandbox "+id+"\n" {
		t.Fatalf("destroy: %q", out)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "get", id, "-o", "json")
	if ended := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)); ended.State != client.StateEnded || ended.EndReason != "destroyed" {
		t.Fatalf("after destroy: %+v", ended)
	}
	code, out, stderr = g.cli(t, op, "sandbox", "list", "--all", "-o", "json")
	if all := decodeJSON[struct{ Sandboxes []client.Sandbox }](t, mustOK(t, code, out, stderr)); len(all.Sandboxes) != 2 {
		t.Fatalf("list --all: %s", out)
	}
	// exec in an ended sandbox is refused (T3): a 410, which exits 1, not 3
	code, _, stderr = g.cli(t, op, "sandbox", "exec", id, "--", "true")
	if code != exitError || !strings.HasPrefix(stderr, "sandgate: 410 sandbox_ended: ") || !strings.Contains(stderr, "\nrules: T3\n") {
		t.Fatalf("exec after destroy: exit %d %s", code, stderr)
	}
}

// A policy denial prints its rules and decision and exits 3: a create on
// the control plane (P2), a session token used to list (T2).
func TestADenialShowsItsRuleIDsAndExits3(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	code, out, stderr := g.cli(t, g.operator, "sandbox", "create", "--node", "control-1")
	if code != exitDenied || out != "" {
		t.Fatalf("create on the control plane: exit %d stdout %q", code, out)
	}
	for _, want := range []string{"sandgate: 403 policy_denied: ", "\nrules: ", "P2", "\ndecision: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	code, out, stderr = g.cli(t, g.operator, "sandbox", "create", "-o", "json")
	session := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)).Token
	code, _, stderr = g.cli(t, session, "sandbox", "list")
	if code != exitDenied || !regexp.MustCompile(`(?m)^rules: T2$`).MatchString(stderr) || !strings.Contains(stderr, "decision: ") {
		t.Fatalf("list with a session token: exit %d\n%s", code, stderr)
	}
}

func TestABadTokenExits1WithAClearMessage(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	code, out, stderr := g.cli(t, "not-a-jwt", "sandbox", "list")
	if code != exitError || out != "" || !strings.HasPrefix(stderr, "sandgate: 401 unauthenticated: ") ||
		!strings.Contains(stderr, "hint: check --token, --token-file or SANDGATE_TOKEN") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
	// an empty token file is refused before any request
	empty := filepath.Join(t.TempDir(), "empty.token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "", "sandbox", "list", "--addr", g.addr, "--token-file", empty)
	if code != exitError || !strings.Contains(stderr, "is empty") {
		t.Fatalf("empty token file: exit %d %s", code, stderr)
	}
}

// SANDGATE_ADDR and SANDGATE_TOKEN are the defaults of --addr and --token;
// the flags and --token-file win over them. (No t.Parallel: t.Setenv.)
func TestTheEnvironmentGivesTheAddressAndTheToken(t *testing.T) {
	g := startLiveGateway(t)
	t.Setenv(envAddr, g.addr)
	t.Setenv(envToken, g.operator)
	code, out, stderr := runCLI(t, "", "sandbox", "list", "-o", "json")
	if l := decodeJSON[struct{ Sandboxes []client.Sandbox }](t, mustOK(t, code, out, stderr)); len(l.Sandboxes) != 0 {
		t.Fatalf("list: %s", out)
	}
	code, out, stderr = runCLI(t, "", "sandbox", "list")
	if mustOK(t, code, out, stderr); out != "no live sandboxes (--all includes ended and failed ones)\n" {
		t.Fatalf("empty list: %q", out)
	}

	// --token-file wins over the environment's token
	file := filepath.Join(t.TempDir(), "bad.token")
	if err := os.WriteFile(file, []byte("forged.token.x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr = runCLI(t, "", "sandbox", "list", "--token-file", file); code != exitError || !strings.Contains(stderr, "401") {
		t.Fatalf("--token-file: exit %d %s", code, stderr)
	}
	if code, _, stderr = runCLI(t, "", "sandbox", "list", "--token-file", file, "--token", "x"); code != exitError || !strings.Contains(stderr, "exclude each other") {
		t.Fatalf("--token and --token-file: exit %d %s", code, stderr)
	}

	// an address where nothing listens is named in the error
	closed := closedAddr(t)
	t.Setenv(envAddr, closed)
	code, _, stderr = runCLI(t, "", "sandbox", "get", "abc")
	if code != exitError || !strings.Contains(stderr, "no answer from the gateway at "+closed) {
		t.Fatalf("closed address: exit %d %s", code, stderr)
	}
	// and no token at all is refused before any request
	t.Setenv(envToken, "")
	if code, _, stderr = runCLI(t, "", "sandbox", "list"); code != exitError || !strings.Contains(stderr, "no token") {
		t.Fatalf("no token: exit %d %s", code, stderr)
	}
}

// A profile, network or image the gateway's bundle does not offer is
// refused before the create, with the ones it offers (GET
// /v1/capabilities); a valid one goes through.
func TestSandboxCreateChecksChoicesAgainstTheGateway(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	for _, tc := range []struct{ flag, value, want string }{
		{"--profile", "strct", `--profile "strct" is not one of strict, workspace`},
		{"--network", "internet", `--network "internet" is not one of egress, none`},
		{"--image", "evil:latest", `--image "evil:latest" is not one of ubuntu:24.04, debian:12-slim, alpine:3.20`},
	} {
		code, out, stderr := g.cli(t, g.operator, "sandbox", "create", tc.flag, tc.value)
		if code != exitError || out != "" || !strings.Contains(stderr, tc.want) {
			t.Fatalf("create %s %s: exit %d stdout %q stderr %q", tc.flag, tc.value, code, out, stderr)
		}
	}
	code, out, stderr := g.cli(t, g.operator, "sandbox", "list", "-o", "json")
	if list := decodeJSON[struct{ Sandboxes []client.Sandbox }](t, mustOK(t, code, out, stderr)); len(list.Sandboxes) != 0 {
		t.Fatalf("a refused choice created a sandbox: %s", out)
	}
	code, out, stderr = g.cli(t, g.operator, "sandbox", "create", "--profile", "workspace", "--image", "alpine:3.20", "-o", "json")
	if s := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)); s.Profile != "workspace" || s.Image != "alpine:3.20" {
		t.Fatalf("created %+v", s)
	}
}

// --stdin-file sends bytes that are not UTF-8 as stdin_base64: the command
// reads every byte.
func TestSandboxExecSendsBinaryStdinAsBase64(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	code, out, stderr := g.cli(t, g.operator, "sandbox", "create", "-o", "json")
	id := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)).ID
	in := "\xff\xfe\x00binary\n"
	code, out, stderr = g.cliIn(t, in, g.operator, "sandbox", "exec", "--stdin-file", "-", "-o", "json", id, "--", "cat")
	res := decodeJSON[client.ExecResult](t, mustOK(t, code, out, stderr))
	if res.ExitCode == nil || *res.ExitCode != 0 || res.StdoutBytes != int64(len(in)) {
		t.Fatalf("cat of %d binary bytes: %s", len(in), out)
	}
}

// --idempotency-key makes a create safe to retry: the repeat answers the
// same sandbox without its token, and --reissue-token hands a fresh one.
func TestSandboxCreateWithAnIdempotencyKeyAnswersTheSameSandbox(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	code, out, stderr := g.cli(t, g.operator, "sandbox", "create", "--idempotency-key", "ci-run-7", "-o", "json")
	first := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	code, out, stderr = g.cli(t, g.operator, "sandbox", "create", "--idempotency-key", "ci-run-7", "-o", "json")
	again := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	if again.ID != first.ID || again.Token != "" || again.TokenReissued == nil || *again.TokenReissued {
		t.Fatalf("a repeat: %+v (first %s)", again, first.ID)
	}
	code, out, stderr = g.cli(t, g.operator, "sandbox", "create", "--idempotency-key", "ci-run-7", "--reissue-token", "-o", "json")
	fresh := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr))
	if fresh.ID != first.ID || fresh.Token == "" || fresh.Token == first.Token || fresh.TokenReissued == nil || !*fresh.TokenReissued {
		t.Fatalf("a reissue: %+v", fresh)
	}
	if code, _, stderr = g.cli(t, g.operator, "sandbox", "create", "--reissue-token"); code != exitError || !strings.Contains(stderr, "--reissue-token needs --idempotency-key") {
		t.Fatalf("--reissue-token alone: exit %d %s", code, stderr)
	}
}

// sandbox exec --stream writes the output as it arrives and exits with
// the command's status; -o json writes one line per event.
func TestSandboxExecStreamMirrorsTheCommand(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	code, out, stderr := g.cli(t, g.operator, "sandbox", "create", "-o", "json")
	id := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)).ID
	code, out, stderr = g.cli(t, g.operator, "sandbox", "exec", "--stream", id, "--", "sh", "-c", "echo out; echo err >&2; exit 5")
	if code != 5 || out != "out\n" || !strings.Contains(stderr, "err\n") {
		t.Fatalf("--stream: exit %d stdout %q stderr %q", code, out, stderr)
	}
	code, out, stderr = g.cli(t, g.operator, "sandbox", "exec", "--stream", "-o", "json", id, "--", "echo", "hi")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], `"event":"start"`) || !strings.Contains(lines[1], `"data":"hi\n"`) || !strings.Contains(lines[2], `"event":"exit"`) {
		t.Fatalf("--stream -o json: exit %d\n%s\n%s", code, out, stderr)
	}
}

// execTimeoutClaim is what `sandbox exec --help` promises of a command the
// timeout stops with SIGTERM; test/e2e holds the real agent to it on both
// images (TestTheCLIsExecTimeoutExitsAsItsHelpSays).
const execTimeoutClaim = "143 (128+SIGTERM)"

// `sandbox exec --help` says what a timeout exits with (issue 21: it said
// 124, and the CLI exited 143): the help's claim, held against an exec
// that times out on the simulator, plain, streamed and as JSON.
func TestTheExecHelpSaysWhatATimeoutExitsWith(t *testing.T) {
	t.Parallel()
	code, help, stderr := runCLI(t, "", "sandbox", "exec", "--help")
	if mustOK(t, code, help, stderr); !strings.Contains(help, execTimeoutClaim) || strings.Contains(help, "124") {
		t.Fatalf("exec --help does not say %q (or still says 124):\n%s", execTimeoutClaim, help)
	}
	claimed, _ := strconv.Atoi(strings.Fields(execTimeoutClaim)[0])

	g := startLiveGateway(t)
	op := g.operator
	code, out, stderr := g.cli(t, op, "sandbox", "create", "-o", "json")
	id := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)).ID
	for _, mode := range [][]string{nil, {"--stream"}} {
		args := append(append([]string{"sandbox", "exec", id, "--timeout", "1s"}, mode...), "--", "sleep", "30")
		code, out, stderr = g.cli(t, op, args...)
		if code != claimed || out != "" || !strings.Contains(stderr, "sandgate: the command timed out after ") {
			t.Fatalf("exec %v: exit %d stdout %q stderr %q, the help says %d", mode, code, out, stderr, claimed)
		}
	}
	code, out, stderr = g.cli(t, op, "sandbox", "exec", id, "--timeout", "1s", "-o", "json", "--", "sleep", "30")
	res := decodeJSON[client.ExecResult](t, mustOK(t, code, out, stderr))
	if !res.TimedOut || res.ExitCode == nil || *res.ExitCode != claimed {
		t.Fatalf("exec -o json: %s", out)
	}
}
