package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"sandgate/gateway/assemble"
	"sandgate/gateway/token"
)

// keyDirIssuer builds the issuer a gateway on the key directory dir would.
func keyDirIssuer(t *testing.T, dir string) *token.Issuer {
	t.Helper()
	iss, _, err := openIssuer(t.TempDir(), signingKeys{Dir: dir}, "", "")
	if err != nil {
		t.Fatalf("open the key dir: %v", err)
	}
	return iss
}

// backdate sets the modification time of path to d ago.
func backdate(t *testing.T, path string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// Rotation end to end through the key commands: generate, mint offline,
// add a key, activate it, retire the old one once its tokens may have
// expired, and watch which tokens verify at each step.
func TestTheKeyCommandsRotateWithOverlap(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	data := t.TempDir()
	key := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, "", append([]string{"key"}, args...)...)
		return mustOK(t, code, out, stderr)
	}
	mintOp := func() string {
		t.Helper()
		code, out, stderr := runCLI(t, "", "token", "mint", "--offline", "--data", data, "--key-dir", dir, "--role", "operator", "--subject", "alice", "--ttl", "1h")
		return strings.TrimSpace(mustOK(t, code, out, stderr))
	}
	verifies := func(iss *token.Issuer, raw string) bool {
		t.Helper()
		_, err := iss.Verify(raw)
		if err != nil && !errors.Is(err, token.ErrInvalid) {
			t.Fatalf("Verify: %v", err)
		}
		return err == nil
	}

	// The first key of a directory is the active one.
	kidA := strings.TrimSpace(key("generate", "--dir", dir))
	if info, err := os.Stat(filepath.Join(dir, kidA+".pem")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file of %s: %v %v", kidA, info, err)
	}
	tokA := mintOp()
	if iss := keyDirIssuer(t, dir); iss.KeyID() != kidA || !verifies(iss, tokA) {
		t.Fatalf("signs with %s, want %s", iss.KeyID(), kidA)
	}
	if _, err := os.Stat(filepath.Join(data, "signing.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--key-dir minted, yet a signing.key was made: %v", err)
	}

	// 1. B verifies only; A still signs.
	code, out, stderr := runCLI(t, "", "key", "generate", "--dir", dir)
	kidB := strings.TrimSpace(mustOK(t, code, out, stderr))
	if !strings.Contains(stderr, "sandgate key activate --dir "+dir+" "+kidB) {
		t.Errorf("generate does not say how to activate: %s", stderr)
	}
	list := key("list", "--dir", dir, "--max-token-lifetime", "1h")
	for _, want := range []string{
		`(?m)^KID +ACTIVE +WRITTEN +NOTE$`,
		`(?m)^` + kidA + ` +yes +\S+ +signs; activate another key before retiring it$`,
		`(?m)^` + kidB + ` +no +\S+ +verifies only; written after the last activation, it never signed$`,
	} {
		if !regexp.MustCompile(want).MatchString(list) {
			t.Fatalf("key list does not match %s:\n%s", want, list)
		}
	}
	if iss := keyDirIssuer(t, dir); iss.KeyID() != kidA {
		t.Fatalf("adding B changed the signer to %s", iss.KeyID())
	}

	// 2. B signs; A's tokens still verify.
	backdate(t, filepath.Join(dir, kidB+".pem"), time.Minute) // written before it is activated
	if out := key("activate", "--dir", dir, kidB); !strings.Contains(out, kidB+" is the active key") {
		t.Fatalf("activate: %q", out)
	}
	tokB := mintOp()
	iss := keyDirIssuer(t, dir)
	if iss.KeyID() != kidB || !verifies(iss, tokA) || !verifies(iss, tokB) {
		t.Fatalf("with B active: signs with %s; A's token %v, B's %v", iss.KeyID(), verifies(iss, tokA), verifies(iss, tokB))
	}

	// The active key is never retired; A not while its tokens may live.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"retire", "--dir", dir, kidB, "--force"}, "activate another key first"},
		{[]string{"retire", "--dir", dir, kidA, "--max-token-lifetime", "1h"}, kidA + " may still have live tokens until "},
		{[]string{"retire", "--dir", dir, "no-such-kid"}, `no key has kid "no-such-kid"`},
		{[]string{"activate", "--dir", dir, "no-such-kid"}, `no key has kid "no-such-kid"`},
	} {
		code, out, stderr := runCLI(t, "", append([]string{"key"}, tc.args...)...)
		if code != exitError || out != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("key %v: exit %d stdout %q stderr %q, want %q", tc.args, code, out, stderr, tc.want)
		}
	}
	if !verifies(keyDirIssuer(t, dir), tokA) {
		t.Fatal("a refused retire removed A")
	}

	// 3. Once the longest lifetime has passed since B became active, A goes,
	// and its tokens with it.
	backdate(t, filepath.Join(dir, kidA+".pem"), 3*time.Hour)
	backdate(t, filepath.Join(dir, token.ActiveFile), 2*time.Hour)
	if list := key("list", "--dir", dir, "--max-token-lifetime", "1h"); !regexp.MustCompile(`(?m)^` + kidA + ` +no +\S+ +verifies only; may be retired`).MatchString(list) {
		t.Fatalf("key list after the lifetime:\n%s", list)
	}
	if out := key("retire", "--dir", dir, kidA, "--max-token-lifetime", "1h"); !strings.HasPrefix(out, "retired "+kidA+": deleted ") {
		t.Fatalf("retire: %q", out)
	}
	iss = keyDirIssuer(t, dir)
	if verifies(iss, tokA) || !verifies(iss, tokB) || len(iss.KeyIDs()) != 1 {
		t.Fatalf("after retiring A: A's token %v, B's %v, kids %v", verifies(iss, tokA), verifies(iss, tokB), iss.KeyIDs())
	}

	// --force retires a key whose tokens may still live (a leaked key).
	kidC := strings.TrimSpace(key("generate", "--dir", dir, "--activate"))
	if iss := keyDirIssuer(t, dir); iss.KeyID() != kidC {
		t.Fatalf("generate --activate: signs with %s", iss.KeyID())
	}
	backdate(t, filepath.Join(dir, kidC+".pem"), time.Minute)
	backdate(t, filepath.Join(dir, kidB+".pem"), time.Minute)
	if code, _, stderr := runCLI(t, "", "key", "retire", "--dir", dir, kidB, "--max-token-lifetime", "1h"); code != exitError || !strings.Contains(stderr, "--force") {
		t.Fatalf("retiring B without --force: exit %d %s", code, stderr)
	}
	key("retire", "--dir", dir, kidB, "--force")
	if verifies(keyDirIssuer(t, dir), tokB) {
		t.Fatal("B's token verifies after B was retired with --force")
	}
}

func TestTheKeyCommandsRefuse(t *testing.T) {
	t.Parallel()
	loose := t.TempDir()
	if err := os.Chmod(loose, 0o777); err != nil { //nolint:gosec // a directory anyone may write, on purpose
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"generate without --dir", []string{"key", "generate"}, "--dir is required"},
		{"list without --dir", []string{"key", "list"}, "--dir is required"},
		{"a directory anyone may write", []string{"key", "list", "--dir", loose}, "lets others add keys"},
		{"a key dir that is not there", []string{"key", "list", "--dir", filepath.Join(loose, "absent")}, "no such file or directory"},
		{"activate without a kid", []string{"key", "activate", "--dir", loose}, "accepts 1 arg"},
		{"an offline mint with a key file and a key dir", []string{"token", "mint", "--offline", "--role", "operator", "--data", t.TempDir(),
			"--key-file", "k.pem", "--key-dir", "keys"}, "--key-file and --key-dir: give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runCLI(t, "", tc.args...)
			if code != exitError || out != "" || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d stdout %q stderr %q, want %q", code, out, stderr, tc.want)
			}
		})
	}
}

// SIGHUP reloads a key directory: the new active key signs, a directory
// that no longer makes a set is logged and the old set verifies on, and
// every signal is passed on to the bundle's reload.
func TestSIGHUPReloadsTheKeyDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	a, err := token.CreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := token.Activate(dir, a.KID); err != nil {
		t.Fatal(err)
	}
	cfg := dataConfig(t.TempDir(), signingKeys{Dir: dir}, "", "")
	iss, _, err := assemble.OpenIssuer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer // written before the signal is passed on, read after
	hup := make(chan os.Signal, 1)
	next := reloadKeysOnHUP(t.Context(), hup, cfg, iss, slog.New(slog.NewTextHandler(&logs, nil)))
	sighup := func() {
		t.Helper()
		hup <- syscall.SIGHUP
		select {
		case <-next:
		case <-time.After(10 * time.Second):
			t.Fatal("the SIGHUP was not passed on")
		}
	}

	b, err := token.CreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := token.Activate(dir, b.KID); err != nil {
		t.Fatal(err)
	}
	sighup()
	if iss.KeyID() != b.KID || !strings.Contains(logs.String(), "token signing keys reloaded") {
		t.Fatalf("after SIGHUP: signs with %s; log %s", iss.KeyID(), logs.String())
	}
	if err := os.WriteFile(filepath.Join(dir, token.ActiveFile), []byte("no-such-kid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sighup()
	if iss.KeyID() != b.KID || !strings.Contains(logs.String(), "token signing keys refused; the old set verifies on") {
		t.Fatalf("after a bad SIGHUP: signs with %s; log %s", iss.KeyID(), logs.String())
	}
}
