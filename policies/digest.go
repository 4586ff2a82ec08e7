package policies

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader"
)

// DigestAlgorithm names how BundleDigest is computed. v1 hashed only
// .manifest, data.json, data.yaml and *.rego, so a data.yml (which OPA
// loads as data) changed a bundle without changing its digest; v2 hashes
// every file OPA's loader takes anything from, as OPA itself decides.
const DigestAlgorithm = "sha256-files-v2"

// signaturesFile is the bundle's signature over its other files: not part
// of the digest, so a signed bundle and the same files unsigned (or
// unpacked into a directory) have one digest.
const signaturesFile = ".signatures.json"

// BundleDigest identifies the bundle held by fsys: the hex SHA-256 over
// the bundle's files as readBundleFiles picks them (every file OPA's
// loader takes anything from: .manifest, every data.json, data.yaml and
// data.yml, every .rego with the tests, and any other kind a later OPA
// loads), in lexical order of their slash paths, each framed as its path,
// a NUL, its length as 8 big-endian bytes and its bytes. The same files
// give the same digest wherever they are (embedded, a directory, a
// tarball); a changed byte, a renamed or an added file OPA loads give
// another.
func BundleDigest(fsys fs.FS) (string, error) {
	files, err := readBundleFiles(fsys)
	if err != nil {
		return "", err
	}
	return digestFiles(files), nil
}

// digested lists, in digest order, the files of a bundle read by
// readBundleFiles.
func digested(files fstest.MapFS) []string {
	return slices.Sorted(maps.Keys(files))
}

// digestFiles is BundleDigest over files already read.
func digestFiles(files fstest.MapFS) string {
	h := sha256.New()
	for _, p := range digested(files) {
		b := files[p].Data
		h.Write([]byte(p))
		h.Write([]byte{0})
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// readBundleFiles reads into memory, within the bounds of a bundle file,
// the files of the bundle in fsys, and only them; the engine loads from
// what it returns, so it serves byte for byte what was digested, even if
// the directory changes meanwhile. Which files count is OPA's choice, not
// a list of names here:
//
//  1. OPA's own bundle directory loader (the one loader.AsBundle uses)
//     walks fsys through a recorder that copies every file it opens: today
//     every regular file, symlinks left out.
//  2. A file counts when OPA's bundle reader, given that file alone,
//     yields anything (data, a module, a manifest, a patch, wasm, a plan,
//     or what a later OPA adds) or an error; one from which it yields what
//     it yields from nothing (a README, the Go sources beside the Rego) is
//     left out, as is the root .signatures.json (the signature over the
//     others). A .rego file (OPA's bundle.RegoExt) always counts, without
//     being parsed for the question.
//
// So a data.yml counts because OPA loads it, and so would a data
// extension a later OPA learns.
func readBundleFiles(fsys fs.FS) (fstest.MapFS, error) {
	rec := &recorder{fsys: fsys, files: fstest.MapFS{}}
	dl, _, err := loader.GetBundleDirectoryLoaderFS(rec, ".", nil)
	if err != nil {
		return nil, fmt.Errorf("policies: read bundle: %w", err)
	}
	for {
		d, err := dl.NextFile()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("policies: read bundle: %w", err)
		}
		_ = d.Close()
	}
	if err := rec.err; err != nil {
		return nil, fmt.Errorf("policies: read bundle: %w", err)
	}
	nothing, err := readAlone(fstest.MapFS{})
	if err != nil {
		return nil, fmt.Errorf("policies: read bundle: %w", err)
	}
	for p, f := range rec.files {
		if p == signaturesFile {
			delete(rec.files, p)
			continue
		}
		// A module always counts (OPA's own bundle.RegoExt): reading each
		// alone would parse it again for nothing.
		if strings.HasSuffix(p, bundle.RegoExt) {
			continue
		}
		if b, err := readAlone(fstest.MapFS{p: f}); err == nil && reflect.DeepEqual(b, nothing) {
			delete(rec.files, p)
		}
	}
	return rec.files, nil
}

// readAlone is what OPA's bundle reader yields from files, read as the
// engine reads a bundle (loadBundle) but without its checks.
func readAlone(files fstest.MapFS) (*bundle.Bundle, error) {
	return loader.NewFileLoader().
		WithFS(files).
		WithProcessAnnotation(true).
		WithRegoVersion(ast.RegoV1).
		WithSkipBundleVerification(true).
		AsBundle(".")
}

// recorder is an fs.FS that copies every regular file opened through it
// into files (at most maxBundleFiles files, maxBundleUnpacked bytes in
// all) and serves the copy. Directories pass through, so walking it walks
// fsys.
type recorder struct {
	fsys  fs.FS
	mu    sync.Mutex
	files fstest.MapFS
	total int64
	err   error // the first bound exceeded; every later open fails too
}

// Open opens name in fsys; a regular file is copied (once) and its copy
// served, a directory passes through.
func (r *recorder) Open(name string) (fs.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	if _, ok := r.files[name]; ok {
		return r.files.Open(name)
	}
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if st.IsDir() {
		return f, nil
	}
	defer f.Close()
	if len(r.files) >= maxBundleFiles {
		r.err = fmt.Errorf("more than %d files", maxBundleFiles)
		return nil, r.err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBundleUnpacked-r.total+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if r.total += int64(len(b)); r.total > maxBundleUnpacked {
		r.err = fmt.Errorf("more than %d bytes", maxBundleUnpacked)
		return nil, r.err
	}
	r.files[name] = &fstest.MapFile{Data: b, Mode: 0o444, ModTime: time.Unix(0, 0)}
	return r.files.Open(name)
}
