package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sandgate/gateway/client"
)

// Tokens through the API: mint an agent token, use it, list it, revoke it,
// and the revoked token is refused on the next call.
func TestTheTokenCommandsMintListAndRevoke(t *testing.T) {
	t.Parallel()
	g := startLiveGateway(t)
	op := g.operator

	code, out, stderr := g.cli(t, op, "token", "mint", "--role", "agent", "--subject", "ci-agent", "--ttl", "1h", "--label", "ci runner", "--max-live-sandboxes", "2")
	agent := strings.TrimSpace(mustOK(t, code, out, stderr))
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(agent, "eyJ") || !strings.Contains(stderr, `minted agent token `) || !strings.Contains(stderr, `for "ci-agent"`) {
		t.Fatalf("mint: stdout %q stderr %q", out, stderr)
	}

	// the agent's sandboxes are owned by its subject
	code, out, stderr = g.cli(t, agent, "sandbox", "create", "-o", "json")
	if s := decodeJSON[client.Sandbox](t, mustOK(t, code, out, stderr)); s.Principal != "agent:ci-agent" {
		t.Fatalf("created as %q", s.Principal)
	}

	code, out, stderr = g.cli(t, op, "token", "list", "-o", "json")
	list := decodeJSON[struct{ Tokens []client.Token }](t, mustOK(t, code, out, stderr)).Tokens
	var minted client.Token
	for _, tk := range list {
		if tk.Subject == "ci-agent" {
			minted = tk
		}
		if tk.Token != "" {
			t.Fatalf("token list shows a secret: %s", out)
		}
	}
	if minted.ID == "" || minted.Role != "agent" || minted.Label != "ci runner" || minted.Quota == nil || minted.Quota.MaxLiveSandboxes != 2 {
		t.Fatalf("the minted token is not listed as minted: %s", out)
	}
	code, out, stderr = g.cli(t, op, "token", "list")
	if mustOK(t, code, out, stderr); !regexp.MustCompile(`(?m)^` + minted.ID + ` +agent +ci-agent +ci runner `).MatchString(out) {
		t.Fatalf("token list table:\n%s", out)
	}

	code, out, stderr = g.cli(t, op, "token", "revoke", minted.ID)
	if mustOK(t, code, out, stderr); out != "revoked token "+minted.ID+"\n" {
		t.Fatalf("revoke: %q", out)
	}
	code, out, stderr = g.cli(t, agent, "sandbox", "list")
	if code != exitError || out != "" || !strings.HasPrefix(stderr, "sandgate: 401 unauthenticated") {
		t.Fatalf("the revoked token: exit %d stdout %q stderr %q", code, out, stderr)
	}

	// -o json: the token object, its secret included this once
	code, out, stderr = g.cli(t, op, "token", "mint", "--role", "operator", "--ttl", "2h", "-o", "json")
	if tk := decodeJSON[client.Token](t, mustOK(t, code, out, stderr)); tk.Role != "operator" || !strings.HasPrefix(tk.Token, "eyJ") {
		t.Fatalf("mint -o json: %s", out)
	}
	// the tokens API is for operators: an agent is denied by policy (T2)
	code, out, stderr = g.cli(t, op, "token", "mint", "--role", "agent", "--ttl", "1h")
	other := strings.TrimSpace(mustOK(t, code, out, stderr))
	if code, _, stderr = g.cli(t, other, "token", "list"); code != exitDenied || !strings.Contains(stderr, "\nrules: T2\n") {
		t.Fatalf("an agent listed tokens: exit %d %s", code, stderr)
	}
}

func TestOfflineMintingNeedsOffline(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"--data without --offline is refused and says why", []string{"--data", t.TempDir()}, "--data works only with --offline"},
		{"--key-file without --offline is refused", []string{"--key-file", "k.pem"}, "--key-file works only with --offline"},
		{"a quota offline is refused", []string{"--offline", "--data", t.TempDir(), "--max-live-sandboxes", "1"}, "mint without --offline"},
		{"a session role is refused", []string{"--offline", "--role", "session"}, "--role must be operator, agent or reviewer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"token", "mint", "--role", "agent", "--addr", closedAddr(t), "--token", "x"}, tc.args...)
			code, out, stderr := runCLI(t, "", args...)
			if code != exitError || out != "" || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d stdout %q stderr %q, want %q", code, out, stderr, tc.want)
			}
		})
	}
}

func TestOfflineMintingRecordsAVerifiableToken(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	code, out, stderr := runCLI(t, "", "token", "mint", "--offline", "--role", "operator", "--subject", "alice", "--ttl", "1h", "--data", data)
	raw := strings.TrimSpace(mustOK(t, code, out, stderr))
	iss, created, err := openIssuer(data, signingKeys{}, "", "")
	if err != nil || created {
		t.Fatalf("the mint left no signing key: created=%v err=%v", created, err)
	}
	claims, err := iss.Verify(raw)
	if err != nil || claims.Subject != "alice" || claims.Role != "operator" {
		t.Fatalf("verify: %+v %v", claims, err)
	}
	st, err := openStore(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rec, err := st.GetToken(t.Context(), claims.ID); err != nil || rec.Subject != "alice" {
		t.Fatalf("token record: %+v %v", rec, err)
	}
}

// Issue 21: `token mint --offline` recorded an operator token valid for 100
// years with the subject "atk2:sub with space" and a 300-byte label. The
// offline mint is decided by the bundle as POST /v1/tokens is (T4): it
// exits 3 naming the rule, and writes nothing (no key, no store).
func TestTheOfflineMintIsRefusedByThePolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
	}{
		{"the attacker's mint", []string{"--role", "operator", "--ttl", "876000h", "--subject", "atk2:sub with space", "--label", strings.Repeat("x", 300)}},
		{"a lifetime of a century", []string{"--role", "operator", "--ttl", "876000h"}},
		{"a subject with a colon", []string{"--role", "agent", "--subject", "agent:ci"}},
		{"a subject with a space", []string{"--role", "operator", "--subject", "sub with space"}},
		{"a label of 300 bytes", []string{"--role", "reviewer", "--label", strings.Repeat("x", 300)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			args := append([]string{"token", "mint", "--offline", "--data", data}, tc.args...)
			code, out, stderr := runCLI(t, "", args...)
			if code != exitDenied || out != "" || !strings.Contains(stderr, "\n  T4: mint: ") || !strings.Contains(stderr, "\nrules: T4\n") ||
				!strings.Contains(stderr, "nothing was minted") {
				t.Fatalf("exit %d stdout %q stderr %q", code, out, stderr)
			}
			if entries, err := os.ReadDir(data); err != nil || len(entries) != 0 {
				t.Fatalf("the refused mint wrote to the data dir: %v %v", entries, err)
			}
		})
	}
}

// The bootstrap (the first operator token, offline) is held to the same
// limits with a policy dir of its own: --policy-dir's data decides.
func TestTheOfflineMintReadsThePolicyDir(t *testing.T) {
	t.Parallel()
	dir := policyDirWith(t, func(cfg map[string]any) {
		cfg["tokens"].(map[string]any)["max_label_bytes"] = 4
	})
	code, out, stderr := runCLI(t, "", "token", "mint", "--offline", "--data", t.TempDir(), "--policy-dir", dir, "--role", "operator", "--ttl", "1h", "--label", "first")
	if code != exitDenied || out != "" || !strings.Contains(stderr, "label must be a string of at most 4 bytes") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "token", "mint", "--offline", "--data", t.TempDir(), "--policy-dir", dir, "--role", "operator", "--ttl", "1h", "--label", "1st")
	mustOK(t, code, out, stderr)
}
