package token

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadOrCreateKeyCreatesAPrivateFileAndReloadsIt(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "keys")
	path := filepath.Join(dir, "signing.pem")

	key, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreateKey = created %v, err %v; want a new key", created, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode %04o, want 0600", perm)
	}
	dinfo, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := dinfo.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("key dir mode %04o, want nothing for group or others", perm)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("key dir holds %d entries, want only the key (no temp files)", len(entries))
	}

	again, created, err := LoadOrCreateKey(path)
	if err != nil || created {
		t.Fatalf("second LoadOrCreateKey = created %v, err %v; want the existing key", created, err)
	}
	if !again.Equal(key) {
		t.Errorf("reloaded key differs from the created one")
	}
	loaded, err := LoadKey(path)
	if err != nil || !loaded.Equal(key) {
		t.Errorf("LoadKey = %v; want the created key", err)
	}

	// The key works for an issuer.
	cfg := DefaultConfig()
	cfg.Key = loaded
	iss, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := mint(t, iss, MintRequest{Role: RoleOperator, Subject: "op", TTL: time.Minute})
	if _, err := iss.Verify(raw); err != nil {
		t.Errorf("Verify with a loaded key: %v", err)
	}
}

func TestLoadKeyRefuses(t *testing.T) {
	t.Parallel()
	goodPEM := func(t *testing.T) []byte {
		t.Helper()
		path := filepath.Join(t.TempDir(), "k.pem")
		if _, _, err := LoadOrCreateKey(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ecPKCS8 := func(t *testing.T) []byte {
		t.Helper()
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}

	tests := []struct {
		name    string
		content func(t *testing.T) []byte
		mode    os.FileMode
		want    error
	}{
		{"a key readable by everyone (0644)", goodPEM, 0o644, ErrKeyPermissions},
		{"a key readable by the group (0640)", goodPEM, 0o640, ErrKeyPermissions},
		{"a key writable by others (0602)", goodPEM, 0o602, ErrKeyPermissions},
		{"a key with the owner execute bit (0700)", goodPEM, 0o700, ErrKeyPermissions},
		{"a PKCS#8 key that is ECDSA, not Ed25519", ecPKCS8, 0o600, ErrKeyInvalid},
		{"a PEM block of another type", func(*testing.T) []byte {
			return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1, 2, 3}})
		}, 0o600, ErrKeyInvalid},
		{"a PRIVATE KEY block that is not PKCS#8", func(*testing.T) []byte {
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not der")})
		}, 0o600, ErrKeyInvalid},
		{"a file that is not PEM", func(*testing.T) []byte { return []byte("hunter2\n") }, 0o600, ErrKeyInvalid},
		{"an empty file", func(*testing.T) []byte { return nil }, 0o600, ErrKeyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "k.pem")
			content := tt.content(t)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadKey(path); !errors.Is(err, tt.want) {
				t.Errorf("LoadKey err = %v, want %v", err, tt.want)
			}
			// LoadOrCreateKey refuses too, and leaves the file alone.
			if _, created, err := LoadOrCreateKey(path); !errors.Is(err, tt.want) || created {
				t.Errorf("LoadOrCreateKey = created %v, err %v; want %v", created, err, tt.want)
			}
			after, err := os.ReadFile(path)
			if err != nil || string(after) != string(content) {
				t.Errorf("LoadOrCreateKey changed a refused key file (err %v)", err)
			}
		})
	}
}

func TestLoadKeyRefusesAMissingFileAndADirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := LoadKey(filepath.Join(dir, "absent.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sub, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(sub); !errors.Is(err, ErrKeyPermissions) {
		t.Errorf("directory: err = %v, want ErrKeyPermissions", err)
	}
}

func TestLoadKeyAcceptsAnOwnerReadOnlyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "k.pem")
	key, _, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKey(path)
	if err != nil || !got.Equal(key) {
		t.Errorf("LoadKey on 0400 = %v; want the key", err)
	}
}
