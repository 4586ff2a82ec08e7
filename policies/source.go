package policies

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// DefaultKeyID names the signing key in a bundle's signature when the
// builder names none, and the verification key when the operator names
// none: the two must agree (`sandgate policy build --key-id`,
// policy.verification_key_id).
const DefaultKeyID = "sandgate"

// Bounds on a bundle file: a bundle is a few hundred KiB; anything far
// larger is refused before it is unpacked.
const (
	maxBundleFileBytes = 16 << 20
	maxBundleFiles     = 1000
	maxBundleUnpacked  = 64 << 20
)

// Errors of a bundle file that must not serve.
var (
	// ErrUnsigned: a verification key is configured and the bundle carries
	// no .signatures.json.
	ErrUnsigned = errors.New("policies: the bundle is not signed")
	// ErrSignature: the signature does not verify with the configured key,
	// or a file of the bundle differs from what was signed.
	ErrSignature = errors.New("policies: the bundle's signature does not verify")
)

// Verification is the public key that must have signed a bundle file.
type Verification struct {
	// KeyPEM is the PEM public key (RSA, ECDSA P-256/P-384, or the
	// matching HMAC secret is not accepted: a reviewer signs, the gateway
	// only verifies).
	KeyPEM string
	// KeyID names the key; the signature's keyid must name the same.
	// Empty means DefaultKeyID.
	KeyID string
	// Algorithm is the JWS algorithm; empty means the key's own (RS256 for
	// RSA, ES256 or ES384 for ECDSA, EdDSA for Ed25519).
	Algorithm string
}

// source is one bundle as read: every file, tests included, and what
// identifies it.
type source struct {
	fsys   fs.FS
	digest string
	signer string // key id that verified the signature; empty if unsigned
}

// readSource reads the bundle cfg names: a bundle file (verified when cfg
// carries a key), a directory, or the embedded bundle.
func readSource(cfg Config) (*source, error) {
	given := 0
	for _, set := range []bool{cfg.Dir != "", cfg.BundleFile != "", cfg.BundleData != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, errors.New("policies: more than one of a bundle directory, file and data were given; give one")
	case cfg.BundleFile != "":
		return readBundleFile(cfg.BundleFile, cfg.Verify)
	case cfg.BundleData != nil:
		if len(cfg.BundleData) > maxBundleFileBytes {
			return nil, fmt.Errorf("policies: the bundle is %d bytes, more than %d", len(cfg.BundleData), maxBundleFileBytes)
		}
		return readBundleBytes("the bundle", cfg.BundleData, cfg.Verify)
	case cfg.Verify != nil:
		return nil, errors.New("policies: a verification key applies to a bundle file (policy.bundle_file), not to a directory")
	}
	fsys, err := bundleFS(cfg.Dir)
	if err != nil {
		return nil, err
	}
	// One read of the directory: the engine loads exactly the files
	// digested (readBundleFiles).
	files, err := readBundleFiles(fsys)
	if err != nil {
		return nil, err
	}
	return &source{fsys: files, digest: digestFiles(files)}, nil
}

// readBundleFile reads an `opa build` or `sandgate policy build` bundle
// (a gzipped tarball). With v set, OPA's own verifier checks its
// .signatures.json first: the bundle must be signed by v's key, and every
// file must hash to what was signed.
func readBundleFile(file string, v *Verification) (*source, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("policies: bundle file: %w", err)
	}
	if st.Size() > maxBundleFileBytes {
		return nil, fmt.Errorf("policies: bundle file %s is %d bytes, more than %d", file, st.Size(), maxBundleFileBytes)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policies: bundle file: %w", err)
	}
	return readBundleBytes(file, raw, v)
}

// readBundleBytes reads a bundle tarball held in memory (see
// readBundleFile); file names it in errors.
func readBundleBytes(file string, raw []byte, v *Verification) (*source, error) {
	files, err := untarBundle(raw)
	if err != nil {
		return nil, fmt.Errorf("policies: bundle file %s: %w", file, err)
	}
	src := &source{fsys: files}
	if v != nil {
		if _, signed := files[".signatures.json"]; !signed {
			return nil, fmt.Errorf("%w: %s has no .signatures.json and policy.verification_key is set", ErrUnsigned, file)
		}
		kc, err := v.keyConfig()
		if err != nil {
			return nil, err
		}
		vc := bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{v.keyID(): kc}, v.keyID(), "", nil)
		_, err = bundle.NewCustomReader(bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(raw), "")).
			WithBundleVerificationConfig(vc).
			WithRegoVersion(ast.RegoV1).
			Read()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrSignature, file, err)
		}
		// OPA verifies with the configured key whatever key id the
		// signature names; the signer reported is the one it names, so
		// it must be the configured one.
		kid, err := signatureKeyID(files[".signatures.json"].Data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrSignature, file, err)
		}
		if kid != v.keyID() {
			return nil, fmt.Errorf("%w: %s is signed under key id %q, and the verification key is %q", ErrSignature, file, kid, v.keyID())
		}
		src.signer = kid
	}
	delete(files, signaturesFile)
	// Every regular entry of the tarball is read (as OPA's tarball reader
	// does); the engine loads the ones OPA takes anything from, which are
	// the ones digested.
	read, err := readBundleFiles(files)
	if err != nil {
		return nil, err
	}
	src.fsys, src.digest = read, digestFiles(read)
	return src, nil
}

// untarBundle unpacks a gzipped bundle tarball into memory, within bounds.
// Only regular files count; paths are cleaned and made relative.
func untarBundle(raw []byte) (fstest.MapFS, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not a gzipped bundle: %w", err)
	}
	tr := tar.NewReader(zr)
	files := fstest.MapFS{}
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tarball: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" || len(files) >= maxBundleFiles {
			return nil, fmt.Errorf("more than %d files, or an empty name", maxBundleFiles)
		}
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("%s appears twice", name)
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxBundleUnpacked-total+1))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if total += int64(len(b)); total > maxBundleUnpacked {
			return nil, fmt.Errorf("unpacks to more than %d bytes", maxBundleUnpacked)
		}
		files[name] = &fstest.MapFile{Data: b, Mode: 0o444, ModTime: time.Unix(0, 0)}
	}
	if _, ok := files[".manifest"]; !ok {
		return nil, errors.New("no .manifest")
	}
	return files, nil
}

// signatureKeyID returns the key id the one signature of a
// .signatures.json names (its JWS "kid" header, else its "keyid" claim).
func signatureKeyID(sigs []byte) (string, error) {
	var doc struct {
		Signatures []string `json:"signatures"`
	}
	if err := json.Unmarshal(sigs, &doc); err != nil {
		return "", fmt.Errorf(".signatures.json: %w", err)
	}
	if len(doc.Signatures) != 1 {
		return "", fmt.Errorf(".signatures.json holds %d signatures, want 1", len(doc.Signatures))
	}
	parts := strings.Split(doc.Signatures[0], ".")
	if len(parts) != 3 {
		return "", errors.New(".signatures.json: the signature is not a compact JWS")
	}
	var hdr, claims struct {
		KID   string `json:"kid"`
		KeyID string `json:"keyid"`
	}
	for i, into := range []any{&hdr, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return "", fmt.Errorf(".signatures.json: %w", err)
		}
		if err := json.Unmarshal(b, into); err != nil {
			return "", fmt.Errorf(".signatures.json: %w", err)
		}
	}
	if hdr.KID != "" {
		return hdr.KID, nil
	}
	if claims.KeyID != "" {
		return claims.KeyID, nil
	}
	return "", errors.New(".signatures.json: the signature names no key id")
}

func (v *Verification) keyID() string {
	if v.KeyID == "" {
		return DefaultKeyID
	}
	return v.KeyID
}

// keyConfig checks the key is a public key and picks its algorithm.
func (v *Verification) keyConfig() (*bundle.KeyConfig, error) {
	alg := v.Algorithm
	if alg == "" {
		var err error
		if alg, err = keyAlgorithm(v.KeyPEM, true); err != nil {
			return nil, err
		}
	}
	return &bundle.KeyConfig{Key: v.KeyPEM, Algorithm: alg}, nil
}

// keyAlgorithm returns the JWS algorithm of a PEM key: RS256 for RSA,
// ES256/ES384/ES512 by the curve for ECDSA, EdDSA for Ed25519.
func keyAlgorithm(keyPEM string, public bool) (string, error) {
	blk, _ := pem.Decode([]byte(keyPEM))
	if blk == nil {
		return "", errors.New("policies: the key is not PEM")
	}
	var key any
	var err error
	switch {
	case public:
		key, err = x509.ParsePKIXPublicKey(blk.Bytes)
	case blk.Type == "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case blk.Type == "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		want := "a private key (PKCS#1, SEC 1 or PKCS#8)"
		if public {
			want = "a public key (PKIX, \"BEGIN PUBLIC KEY\")"
		}
		return "", fmt.Errorf("policies: the key is not %s: %w", want, err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey, *rsa.PrivateKey:
		return "RS256", nil
	case ed25519.PublicKey, ed25519.PrivateKey:
		return "EdDSA", nil
	case *ecdsa.PublicKey:
		return ecAlgorithm(k.Curve)
	case *ecdsa.PrivateKey:
		return ecAlgorithm(k.Curve)
	}
	return "", fmt.Errorf("policies: unsupported key type %T", key)
}

func ecAlgorithm(c elliptic.Curve) (string, error) {
	switch c {
	case elliptic.P256():
		return "ES256", nil
	case elliptic.P384():
		return "ES384", nil
	case elliptic.P521():
		return "ES512", nil
	}
	return "", errors.New("policies: unsupported ECDSA curve")
}
