package token

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// keyPEM encodes key as LoadKeys reads it.
func keyPEM(tb testing.TB, key ed25519.PrivateKey) []byte {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der})
}

func writeKeyFile(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// A key set rendered into one file (as a Nomad template renders a
// variable) is read whole; LoadKey, which wants one key, refuses it
// rather than read its first key alone, and anything besides keys in the
// file is refused.
func TestOneFileMayHoldAKeySet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := testKey(7), testKey(8)
	set := append(append(keyPEM(t, a), '\n'), keyPEM(t, b)...)
	path := writeKeyFile(t, dir, "set.pem", append(set, "\n\n"...))
	keys, err := LoadKeys(path)
	if err != nil || len(keys) != 2 || !keys[0].Equal(a) || !keys[1].Equal(b) {
		t.Fatalf("LoadKeys of a file of two keys: %d keys, %v", len(keys), err)
	}
	if _, err := LoadKey(path); !errors.Is(err, ErrKeyInvalid) {
		t.Fatalf("LoadKey of a file of two keys: %v, want ErrKeyInvalid", err)
	}
	for name, data := range map[string][]byte{
		"empty":                {},
		"white space only":     []byte(" \n\t\n"),
		"text before the keys": append([]byte("kid: x\n"), set...),
		"text between keys":    append(append(keyPEM(t, a), "garbage\n"...), keyPEM(t, b)...),
		"text after the keys":  append(slices.Clone(set), "trailing\n"...),
		"another block type":   append(slices.Clone(set), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})...),
	} {
		if _, err := LoadKeys(writeKeyFile(t, dir, "bad.pem", data)); !errors.Is(err, ErrKeyInvalid) {
			t.Errorf("%s: %v, want ErrKeyInvalid", name, err)
		}
	}
}

// A key directory whose set is one file (a template's) verifies with
// every key and signs with the active one; Retire refuses a key that
// shares its file, and CreateKey and Retire still work beside it.
func TestAKeyDirectoryMayHoldItsSetInOneFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := testKey(9), testKey(10)
	writeKeyFile(t, dir, "keys.pem", append(keyPEM(t, a), keyPEM(t, b)...))
	if err := Activate(dir, PrivateKeyID(b)); err != nil {
		t.Fatal(err)
	}
	d, err := ReadKeyDir(dir)
	if err != nil || len(d.Keys) != 2 {
		t.Fatalf("ReadKeyDir: %+v %v", d.Keys, err)
	}
	active, verify, err := d.Select()
	if err != nil || !active.Equal(b) || len(verify) != 1 || !verify[0].Equal(a.Public()) {
		t.Fatalf("Select: active %v, verify %d keys, %v", active.Equal(b), len(verify), err)
	}
	if _, err := Retire(dir, PrivateKeyID(a)); !errors.Is(err, ErrKeySet) {
		t.Fatalf("Retire of a key that shares its file: %v, want ErrKeySet", err)
	}
	c := createKey(t, dir)
	if _, err := Retire(dir, c.KID); err != nil {
		t.Fatalf("Retire of a key with a file of its own: %v", err)
	}
	writeKeyFile(t, dir, "copy.pem", keyPEM(t, a))
	if _, err := ReadKeyDir(dir); !errors.Is(err, ErrKeySet) {
		t.Fatalf("one key in the set file and in another: %v, want ErrKeySet", err)
	}
}
