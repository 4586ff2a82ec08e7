package token

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// issuerFromDir builds an issuer at testNow from the key directory dir, as
// a gateway starting on it does.
func issuerFromDir(tb testing.TB, dir string) *Issuer {
	tb.Helper()
	d, err := ReadKeyDir(dir)
	if err != nil {
		tb.Fatalf("ReadKeyDir: %v", err)
	}
	cfg := DefaultConfig()
	if cfg.Key, cfg.VerifyKeys, err = d.Select(); err != nil {
		tb.Fatalf("Select: %v", err)
	}
	cfg.Now = func() time.Time { return testNow }
	iss, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return iss
}

func createKey(tb testing.TB, dir string) DirKey {
	tb.Helper()
	k, err := CreateKey(dir)
	if err != nil {
		tb.Fatalf("CreateKey: %v", err)
	}
	return k
}

func TestAKeyDirectoryRotatesWithOverlap(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	a := createKey(t, dir)
	if info, err := os.Stat(a.Path); err != nil || info.Mode().Perm() != 0o600 || filepath.Base(a.Path) != a.KID+KeyExt {
		t.Fatalf("key file %s: %v %v, want 0600 named by its kid", a.Path, info, err)
	}
	if _, err := ReadKeyDir(dir); err != nil {
		t.Fatal(err)
	}
	if d, _ := ReadKeyDir(dir); d.Active != "" {
		t.Fatalf("CreateKey activated %s", d.Active)
	}
	if err := Activate(dir, a.KID); err != nil {
		t.Fatal(err)
	}
	// Two replicas on copies of one directory verify each other's tokens.
	r1, r2 := issuerFromDir(t, dir), issuerFromDir(t, dir)
	tokA, _ := mint(t, r1, MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour})
	if _, err := r2.Verify(tokA); err != nil {
		t.Fatalf("replica 2 refuses replica 1's token: %v", err)
	}

	// Add B, verification only: A still signs, both verify.
	b := createKey(t, dir)
	withB := issuerFromDir(t, dir)
	if withB.KeyID() != a.KID {
		t.Fatalf("adding a key changed the signer to %s", withB.KeyID())
	}
	tokA2, _ := mint(t, withB, MintRequest{Role: RoleAgent, Subject: "a", TTL: time.Hour})
	// Activate B: B signs; A's tokens, old and new, still verify.
	if err := Activate(dir, b.KID); err != nil {
		t.Fatal(err)
	}
	bActive := issuerFromDir(t, dir)
	if bActive.KeyID() != b.KID {
		t.Fatalf("the signer is %s, want B", bActive.KeyID())
	}
	tokB, _ := mint(t, bActive, MintRequest{Role: RoleAgent, Subject: "b", TTL: time.Hour})
	for _, raw := range []string{tokA, tokA2, tokB} {
		if _, err := bActive.Verify(raw); err != nil {
			t.Errorf("with B active: %v", err)
		}
	}
	// A replica still on the old directory (A active, B known) takes B's.
	if _, err := withB.Verify(tokB); err != nil {
		t.Errorf("a replica not yet restarted refuses B's token: %v", err)
	}

	// The active key cannot be retired; A can, and its tokens go with it.
	if _, err := Retire(dir, b.KID); !errors.Is(err, ErrKeyActive) {
		t.Fatalf("Retire(active) = %v, want ErrKeyActive", err)
	}
	if k, err := Retire(dir, a.KID); err != nil || k.KID != a.KID {
		t.Fatalf("Retire(A) = %+v, %v", k, err)
	}
	if _, err := os.Stat(a.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("A's file is still there: %v", err)
	}
	retired := issuerFromDir(t, dir)
	if _, err := retired.Verify(tokA); !errors.Is(err, ErrInvalid) {
		t.Errorf("A's token after A was retired: %v, want ErrInvalid", err)
	}
	if _, err := retired.Verify(tokB); err != nil {
		t.Errorf("B's token after A was retired: %v", err)
	}
	if _, err := Retire(dir, a.KID); !errors.Is(err, ErrKeySet) {
		t.Errorf("retiring A twice = %v, want ErrKeySet", err)
	}
	if err := Activate(dir, a.KID); !errors.Is(err, ErrKeySet) {
		t.Errorf("activating a retired key = %v, want ErrKeySet", err)
	}
}

func TestReadKeyDirAndSelectRefuse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  error
	}{
		{"a directory others may write", func(t *testing.T, dir string) {
			createKey(t, dir)
			if err := os.Chmod(dir, 0o733); err != nil { //nolint:gosec // a directory others may write, on purpose
				t.Fatal(err)
			}
		}, ErrKeyPermissions},
		{"a key file others may read", func(t *testing.T, dir string) {
			k := createKey(t, dir)
			if err := os.Chmod(k.Path, 0o644); err != nil { //nolint:gosec // a key anyone may read, on purpose
				t.Fatal(err)
			}
		}, ErrKeyPermissions},
		{"a .pem file that is no key", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("hello"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrKeyInvalid},
		{"one key in two files", func(t *testing.T, dir string) {
			k := createKey(t, dir)
			b, err := os.ReadFile(k.Path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "copy.pem"), b, 0o600); err != nil { //nolint:gosec // a test's temp dir
				t.Fatal(err)
			}
		}, ErrKeySet},
		{"no keys", func(*testing.T, string) {}, ErrKeySet},
		{"keys and no active file", func(t *testing.T, dir string) { createKey(t, dir) }, ErrKeySet},
		{"an active file naming a kid no key has", func(t *testing.T, dir string) {
			createKey(t, dir)
			if err := os.WriteFile(filepath.Join(dir, ActiveFile), []byte(PrivateKeyID(testKey(9))+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrKeySet},
		{"an active file naming two kids", func(t *testing.T, dir string) {
			k1, k2 := createKey(t, dir), createKey(t, dir)
			if err := os.WriteFile(filepath.Join(dir, ActiveFile), []byte(k1.KID+"\n"+k2.KID+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrKeySet},
		{"an empty active file", func(t *testing.T, dir string) {
			createKey(t, dir)
			if err := os.WriteFile(filepath.Join(dir, ActiveFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrKeySet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.setup(t, dir)
			d, err := ReadKeyDir(dir)
			if err == nil {
				_, _, err = d.Select()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReadKeyDirSkipsWhatIsNotAKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := createKey(t, dir)
	if err := Activate(dir, k.KID); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"README": "keys", ".half.pem.tmp-1": "x", ".hidden.pem": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil { //nolint:gosec // not a key
			t.Fatal(err)
		}
	}
	d, err := ReadKeyDir(dir)
	if err != nil || len(d.Keys) != 1 || d.Active != k.KID || d.ActiveSince.IsZero() {
		t.Fatalf("ReadKeyDir = %+v, %v", d, err)
	}
	if _, err := ReadKeyDir(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing dir: %v, want fs.ErrNotExist", err)
	}
}

func TestCreateKeyStopsAtMaxKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for range MaxKeys {
		createKey(t, dir)
	}
	if _, err := CreateKey(dir); !errors.Is(err, ErrKeySet) {
		t.Fatalf("key %d: %v, want ErrKeySet", MaxKeys+1, err)
	}
}
