package policies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"
)

// BuildOptions says what Build packs and how it signs it.
type BuildOptions struct {
	// Dir is the bundle directory (.manifest, data.json, *.rego, tests).
	Dir string
	// Revision replaces the .manifest revision when not empty.
	Revision string
	// SigningKeyPEM is the PEM private key that signs the bundle; empty
	// builds an unsigned bundle.
	SigningKeyPEM string
	// Algorithm is the JWS algorithm; empty means the key's own (RS256,
	// ES256/ES384/ES512, EdDSA).
	Algorithm string
	// KeyID names the key in the signature (its keyid claim); empty means
	// DefaultKeyID.
	KeyID string
}

// BuildResult describes a built bundle.
type BuildResult struct {
	Revision string
	Digest   string // BundleDigest of the files it holds
	Signed   bool
	KeyID    string
	Bytes    int
}

// Build checks the bundle in o.Dir as a reload would (it must load,
// compile, carry its annotations and pass its own tests), then writes it to
// w as an OPA bundle tarball, tests included, signed with OPA's own
// .signatures.json when a key is given (so `opa build --verification-key`
// and `opa run --verification-key` verify it too).
func Build(ctx context.Context, o BuildOptions, w io.Writer) (BuildResult, error) {
	if o.Dir == "" {
		return BuildResult{}, errors.New("policies: build: a bundle directory is required")
	}
	if _, err := build(ctx, Config{Dir: o.Dir, VerifyTests: true}); err != nil {
		return BuildResult{}, fmt.Errorf("policies: build: the bundle in %s would not serve: %w", o.Dir, err)
	}
	keyID := o.KeyID
	if keyID == "" {
		keyID = DefaultKeyID
	}
	var buf bytes.Buffer
	c := compile.New().
		WithFS(os.DirFS(o.Dir)).
		WithPaths(".").
		WithAsBundle(true).
		WithRegoVersion(ast.RegoV1).
		WithOutput(&buf)
	if o.Revision != "" {
		c = c.WithRevision(o.Revision)
	}
	if o.SigningKeyPEM != "" {
		alg := o.Algorithm
		if alg == "" {
			var err error
			if alg, err = keyAlgorithm(o.SigningKeyPEM, false); err != nil {
				return BuildResult{}, err
			}
		}
		c = c.WithBundleSigningConfig(bundle.NewSigningConfig(o.SigningKeyPEM, alg, "")).
			WithBundleVerificationKeyID(keyID)
	}
	if err := c.Build(ctx); err != nil {
		return BuildResult{}, fmt.Errorf("policies: build: %w", err)
	}
	// Read back what was written, as the gateway will: the result names the
	// revision and digest GET /v1/policy will report.
	files, err := untarBundle(buf.Bytes())
	if err != nil {
		return BuildResult{}, fmt.Errorf("policies: build: read back: %w", err)
	}
	_, signed := files[".signatures.json"]
	delete(files, ".signatures.json")
	digest, err := BundleDigest(files)
	if err != nil {
		return BuildResult{}, err
	}
	b, err := loadBundle(files, false)
	if err != nil {
		return BuildResult{}, fmt.Errorf("policies: build: read back: %w", err)
	}
	n, err := w.Write(buf.Bytes())
	if err != nil {
		return BuildResult{}, fmt.Errorf("policies: build: write: %w", err)
	}
	res := BuildResult{Revision: b.Manifest.Revision, Digest: digest, Signed: signed, Bytes: n}
	if signed {
		res.KeyID = keyID
	}
	return res, nil
}
