package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// pemType is the PEM block type of a PKCS#8 private key.
const pemType = "PRIVATE KEY"

// maxKeyFileSize bounds what LoadKey reads; a PKCS#8 Ed25519 PEM is ~120 bytes.
const maxKeyFileSize = 64 << 10

// LoadKey reads the Ed25519 signing key at path: a PEM "PRIVATE KEY"
// (PKCS#8) block in a regular file whose mode grants nothing beyond 0600.
// A missing file is an error that matches fs.ErrNotExist; a file with a
// looser mode matches ErrKeyPermissions; anything that is not one PKCS#8
// Ed25519 key (a second key included: LoadKeys reads those) matches
// ErrKeyInvalid.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	keys, err := LoadKeys(path)
	if err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("token: load key %s: %d keys in one file, want one: %w", path, len(keys), ErrKeyInvalid)
	}
	return keys[0], nil
}

// LoadKeys reads the Ed25519 keys at path as LoadKey does, the file
// holding one key or several: PEM "PRIVATE KEY" blocks back to back (a key
// set rendered into one file, as a Nomad template renders a variable),
// with nothing but white space between and around them. A file without a
// key, or with anything else in it, matches ErrKeyInvalid.
func LoadKeys(path string) ([]ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token: load key: %w", err)
	}
	defer func() { _ = f.Close() }()

	// Stat the open file, not the path, so the mode checked is the mode of
	// the bytes read.
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token: load key %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("token: load key %s: not a regular file: %w", path, ErrKeyPermissions)
	}
	if perm := info.Mode().Perm(); perm&^0o600 != 0 {
		return nil, fmt.Errorf("token: load key %s: mode %04o, want 0600 (chmod 600 %s): %w",
			path, perm, path, ErrKeyPermissions)
	}

	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("token: load key %s: %w", path, err)
	}
	if len(data) > maxKeyFileSize {
		return nil, fmt.Errorf("token: load key %s: file larger than %d bytes: %w", path, maxKeyFileSize, ErrKeyInvalid)
	}
	keys, err := parseKeysPEM(data)
	if err != nil {
		return nil, fmt.Errorf("token: load key %s: %w", path, err)
	}
	return keys, nil
}

// LoadOrCreateKey returns the key at path, as LoadKey does, or, when no file
// exists there, generates a new Ed25519 key, writes it with mode 0600
// (creating missing directories with mode 0700) and reports created = true.
// The file appears atomically: it is written to a temporary file in the same
// directory and then moved into place, so a crash never leaves a partial key,
// and a key another process wrote first is loaded rather than replaced.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(path)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}

	key, data, err := newKeyPEM()
	if err != nil {
		return nil, false, err
	}
	won, err := writeNew(path, data)
	if err != nil {
		return nil, false, err
	}
	if !won {
		// Another process created the file between our open and our link.
		key, err = LoadKey(path)
		return key, false, err
	}
	return key, true, nil
}

// newKeyPEM generates an Ed25519 key and encodes it as LoadKey reads it.
func newKeyPEM() (ed25519.PrivateKey, []byte, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("token: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("token: encode key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der}), nil
}

// parseKeysPEM decodes every PEM block of data as a PKCS#8 Ed25519 key;
// data must hold at least one and nothing besides them but white space.
func parseKeysPEM(data []byte) ([]ed25519.PrivateKey, error) {
	var keys []ed25519.PrivateKey
	for rest := data; ; {
		if len(bytes.TrimSpace(rest)) == 0 {
			break
		}
		block, after := pem.Decode(rest)
		if block == nil {
			if len(keys) == 0 {
				return nil, fmt.Errorf("no PEM block: %w", ErrKeyInvalid)
			}
			return nil, fmt.Errorf("something other than a PEM block after key %d: %w", len(keys), ErrKeyInvalid)
		}
		// pem.Decode skips text before a block: refuse it.
		if lead := rest[:len(rest)-len(after)]; !bytes.HasPrefix(bytes.TrimLeft(lead, " \t\r\n"), []byte("-----BEGIN ")) {
			return nil, fmt.Errorf("text before the PEM block of key %d: %w", len(keys)+1, ErrKeyInvalid)
		}
		key, err := parseKeyBlock(block)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", len(keys)+1, err)
		}
		keys = append(keys, key)
		rest = after
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no PEM block: %w", ErrKeyInvalid)
	}
	return keys, nil
}

// parseKeyBlock decodes one PEM block as a PKCS#8 Ed25519 key.
func parseKeyBlock(block *pem.Block) (ed25519.PrivateKey, error) {
	if block.Type != pemType {
		return nil, fmt.Errorf("PEM block type %q, want %q: %w", block.Type, pemType, ErrKeyInvalid)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyInvalid, err)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key type %T: %w", parsed, ErrKeyInvalid)
	}
	return key, nil
}

// writeNew writes data to path with mode 0600 only if path does not exist
// yet. It reports false (and no error) when path appeared meanwhile.
func writeNew(path string, data []byte) (won bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("token: create key dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return false, fmt.Errorf("token: write key: %w", err)
	}
	tmpName := tmp.Name()
	defer func() { _ = os.Remove(tmpName) }() // after a link or rename: harmless

	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("token: write key: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("token: write key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return false, fmt.Errorf("token: write key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("token: write key: %w", err)
	}

	// A hard link never replaces an existing file, so two gateways starting
	// at once cannot each believe their own key is the one on disk. Where
	// the filesystem has no hard links, fall back to rename.
	switch err := os.Link(tmpName, path); {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return false, nil
	default:
		if err := os.Rename(tmpName, path); err != nil {
			return false, fmt.Errorf("token: write key: %w", err)
		}
	}
	syncDir(dir)
	return true, nil
}

// syncDir makes the new directory entry durable; best effort, as not every
// platform can fsync a directory.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
