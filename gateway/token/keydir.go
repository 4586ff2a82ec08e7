package token

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A key directory holds a gateway's key set: key files, each a PKCS#8
// Ed25519 PEM of mode 0600 as LoadKeys reads it, named <kid>.pem by
// CreateKey (any name ending in KeyExt is read; the kid always comes from
// the key), and the file ActiveFile naming the kid that signs. Every key
// verifies. A file may also hold several keys (the whole set rendered
// into one file, as a Nomad template renders a variable); CreateKey and
// Retire keep one key per file. Replicas given copies of one directory
// sign and verify alike.
const (
	// ActiveFile names the active key's kid (one line).
	ActiveFile = "active"
	// KeyExt ends the name of every key file of a key directory; other
	// entries, and names starting with a dot, are not keys.
	KeyExt = ".pem"
)

// DirKey is one key of a key directory.
type DirKey struct {
	// KID is KeyID of the key's public half.
	KID string
	// Path is the key's file.
	Path string
	// Key is the private key.
	Key ed25519.PrivateKey
	// ModTime is the file's modification time: when it was written.
	ModTime time.Time
}

// KeyDir is what ReadKeyDir found in a key directory.
type KeyDir struct {
	// Dir is the directory read.
	Dir string
	// Keys are its keys, ordered by kid.
	Keys []DirKey
	// Active is the kid ActiveFile names; "" when there is no such file.
	// ReadKeyDir does not check that a key has it: Select does.
	Active string
	// ActiveSince is ActiveFile's modification time: since when the
	// active key has signed (and the others have not).
	ActiveSince time.Time
}

// ReadKeyDir reads the key directory dir. It refuses a directory group or
// others may write (whoever adds a key file mints any token:
// ErrKeyPermissions), a key file LoadKey refuses, more than MaxKeys keys
// and one key in two files (ErrKeySet). A missing dir matches
// fs.ErrNotExist.
func ReadKeyDir(dir string) (KeyDir, error) {
	d := KeyDir{Dir: dir}
	info, err := os.Stat(dir)
	if err != nil {
		return d, fmt.Errorf("token: key dir: %w", err)
	}
	if !info.IsDir() {
		return d, fmt.Errorf("token: key dir %s: not a directory: %w", dir, ErrKeyPermissions)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return d, fmt.Errorf("token: key dir %s: mode %04o lets others add keys (chmod go-w %s): %w", dir, perm, dir, ErrKeyPermissions)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return d, fmt.Errorf("token: key dir: %w", err)
	}
	byKID := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, KeyExt) || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		keys, err := LoadKeys(path)
		if err != nil {
			return d, err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return d, fmt.Errorf("token: key dir: %w", err)
		}
		for _, key := range keys {
			kid := PrivateKeyID(key)
			if other, dup := byKID[kid]; dup {
				return d, fmt.Errorf("token: key dir %s: %s and %s hold the same key %s: %w", dir, other, name, kid, ErrKeySet)
			}
			byKID[kid] = name
			d.Keys = append(d.Keys, DirKey{KID: kid, Path: path, Key: key, ModTime: fi.ModTime()})
		}
	}
	if len(d.Keys) > MaxKeys {
		return d, fmt.Errorf("token: key dir %s: %d keys, at most %d (retire some): %w", dir, len(d.Keys), MaxKeys, ErrKeySet)
	}
	slices.SortFunc(d.Keys, func(a, b DirKey) int { return strings.Compare(a.KID, b.KID) })

	d.Active, d.ActiveSince, err = readActive(dir)
	return d, err
}

// maxActiveFileSize bounds what readActive reads; a kid is 43 bytes.
const maxActiveFileSize = 1 << 10

// readActive reads ActiveFile; a missing one is "" and no error.
func readActive(dir string) (string, time.Time, error) {
	f, err := os.Open(filepath.Join(dir, ActiveFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token: key dir: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token: key dir: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxActiveFileSize))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token: key dir: %w", err)
	}
	kid := string(bytes.TrimSpace(b))
	if kid == "" || strings.ContainsAny(kid, " \t\r\n") {
		return "", time.Time{}, fmt.Errorf("token: key dir %s: %s must hold one kid: %w", dir, ActiveFile, ErrKeySet)
	}
	return kid, info.ModTime(), nil
}

// Select returns the active key and the public halves of the others, for
// Config.Key and Config.VerifyKeys. It refuses (ErrKeySet) a directory
// without keys, without ActiveFile, or whose ActiveFile names a kid none
// of its keys has.
func (d KeyDir) Select() (ed25519.PrivateKey, []ed25519.PublicKey, error) {
	if len(d.Keys) == 0 {
		return nil, nil, fmt.Errorf("token: key dir %s: no key files (sandgate key generate --dir %s): %w", d.Dir, d.Dir, ErrKeySet)
	}
	if d.Active == "" {
		return nil, nil, fmt.Errorf("token: key dir %s: no %s file names the signing key (sandgate key activate --dir %s KID): %w",
			d.Dir, ActiveFile, d.Dir, ErrKeySet)
	}
	keys := make([]ed25519.PrivateKey, len(d.Keys))
	for i, k := range d.Keys {
		keys[i] = k.Key
	}
	active, verify, err := SelectActive(keys, d.Active)
	if err != nil {
		return nil, nil, fmt.Errorf("token: key dir %s: %w", d.Dir, err)
	}
	return active, verify, nil
}

// Key returns the key whose kid is kid, and whether there is one.
func (d KeyDir) Key(kid string) (DirKey, bool) {
	for _, k := range d.Keys {
		if k.KID == kid {
			return k, true
		}
	}
	return DirKey{}, false
}

// CreateKey generates a key and writes it to dir as <kid>.pem, mode 0600
// (creating dir with mode 0700 when missing), atomically as
// LoadOrCreateKey does. It does not make the key active. It refuses when
// dir already holds MaxKeys keys (ErrKeySet) or cannot be read as
// ReadKeyDir reads it.
func CreateKey(dir string) (DirKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DirKey{}, fmt.Errorf("token: create key dir: %w", err)
	}
	d, err := ReadKeyDir(dir)
	if err != nil {
		return DirKey{}, err
	}
	if len(d.Keys) >= MaxKeys {
		return DirKey{}, fmt.Errorf("token: key dir %s: already %d keys, at most %d (retire one first): %w", dir, len(d.Keys), MaxKeys, ErrKeySet)
	}
	key, data, err := newKeyPEM()
	if err != nil {
		return DirKey{}, err
	}
	kid := PrivateKeyID(key)
	path := filepath.Join(dir, kid+KeyExt)
	won, err := writeNew(path, data)
	if err != nil {
		return DirKey{}, err
	}
	if !won { // a 256-bit collision: not in this universe
		return DirKey{}, fmt.Errorf("token: key dir %s: %s exists", dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return DirKey{}, fmt.Errorf("token: key dir: %w", err)
	}
	return DirKey{KID: kid, Path: path, Key: key, ModTime: fi.ModTime()}, nil
}

// Activate makes the key kid of dir the active one: ActiveFile is
// replaced atomically (a reader sees the old kid or the new one). It
// refuses a kid none of dir's keys has (ErrKeySet).
func Activate(dir, kid string) error {
	d, err := ReadKeyDir(dir)
	if err != nil {
		return err
	}
	if _, ok := d.Key(kid); !ok {
		return fmt.Errorf("token: key dir %s: no key has kid %q: %w", dir, kid, ErrKeySet)
	}
	tmp, err := os.CreateTemp(dir, "."+ActiveFile+".tmp-*") // mode 0600
	if err != nil {
		return fmt.Errorf("token: activate: %w", err)
	}
	tmpName := tmp.Name()
	defer func() { _ = os.Remove(tmpName) }() // after the rename: harmless
	_, werr := tmp.WriteString(kid + "\n")
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("token: activate: %w", werr)
	}
	if err := os.Rename(tmpName, filepath.Join(dir, ActiveFile)); err != nil {
		return fmt.Errorf("token: activate: %w", err)
	}
	syncDir(dir)
	return nil
}

// Retire deletes the key kid's file from dir: tokens it signed are refused
// once a gateway on dir starts or reloads. It refuses the active key
// (ErrKeyActive), a kid none of dir's keys has, and a key whose file holds
// other keys too (ErrKeySet: rewrite that file without it), and returns
// the key's file as it was.
func Retire(dir, kid string) (DirKey, error) {
	d, err := ReadKeyDir(dir)
	if err != nil {
		return DirKey{}, err
	}
	k, ok := d.Key(kid)
	if !ok {
		return DirKey{}, fmt.Errorf("token: key dir %s: no key has kid %q: %w", dir, kid, ErrKeySet)
	}
	if kid == d.Active {
		return DirKey{}, fmt.Errorf("token: key dir %s: %s signs; activate another key first: %w", dir, kid, ErrKeyActive)
	}
	for _, other := range d.Keys {
		if other.KID != kid && other.Path == k.Path {
			return DirKey{}, fmt.Errorf("token: key dir %s: %s holds %s and other keys; write it again without this one: %w", dir, k.Path, kid, ErrKeySet)
		}
	}
	if err := os.Remove(k.Path); err != nil {
		return DirKey{}, fmt.Errorf("token: retire: %w", err)
	}
	syncDir(dir)
	return k, nil
}
