package policies

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// DigestAlgorithm names how BundleDigest is computed.
const DigestAlgorithm = "sha256-files-v1"

// BundleDigest identifies the bundle held by fsys: the hex SHA-256 over
// every file the engine reads from it (.manifest, every data.json or
// data.yaml and every .rego, its tests included), in lexical order of their slash paths, each
// framed as its path, a NUL, its length as 8 big-endian bytes and its
// bytes. The same files give the same digest wherever they are; a changed
// byte, a renamed or an added file give another.
func BundleDigest(fsys fs.FS) (string, error) {
	var files []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if base := path.Base(p); p == ".manifest" || base == "data.json" || base == "data.yaml" || strings.HasSuffix(p, ".rego") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("policies: digest: %w", err)
	}
	slices.Sort(files)
	h := sha256.New()
	for _, p := range files {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return "", fmt.Errorf("policies: digest: %w", err)
		}
		h.Write([]byte(p))
		h.Write([]byte{0})
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
