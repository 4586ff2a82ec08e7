package policies

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Entrypoint names one decision of the bundle.
type Entrypoint string

// The bundle's entrypoints.
const (
	// Authz decides a REST request: data.sandgate.authz.decision.
	Authz Entrypoint = "authz"
	// Admission decides a rendered Nomad job: data.sandgate.admission.decision.
	Admission Entrypoint = "admission"
	// Lifecycle decides ending a sandbox and purging a job:
	// data.sandgate.lifecycle.decision.
	Lifecycle Entrypoint = "lifecycle"
	// Hosts decides an operator's change to a host (enroll, unenroll,
	// operator state): data.sandgate.hosts.decision.
	Hosts Entrypoint = "hosts"
	// Reclaim decides whether a node's sandboxes may stay on it (a deny with
	// R2 or R3 reclaims them): data.sandgate.reclaim.decision.
	Reclaim Entrypoint = "reclaim"
	// Isolation decides the plan of a host isolation script before
	// `sandgate isolation render` prints it: data.sandgate.isolation.decision.
	Isolation Entrypoint = "isolation"
)

// Entrypoints lists every entrypoint the engine prepares.
var Entrypoints = []Entrypoint{Authz, Admission, Lifecycle, Hosts, Reclaim, Isolation}

// EntrypointNames returns the names of Entrypoints, in their order.
func EntrypointNames() []string {
	names := make([]string, len(Entrypoints))
	for i, ep := range Entrypoints {
		names[i] = string(ep)
	}
	return names
}

// Query returns the Rego query of the entrypoint.
func (ep Entrypoint) Query() string { return "data.sandgate." + string(ep) + ".decision" }

// ParseEntrypoint returns the entrypoint named s, or ErrUnknownEntrypoint.
func ParseEntrypoint(s string) (Entrypoint, error) {
	for _, ep := range Entrypoints {
		if string(ep) == s {
			return ep, nil
		}
	}
	return "", fmt.Errorf("%w: %q (want authz, admission, lifecycle, hosts, reclaim or isolation)", ErrUnknownEntrypoint, s)
}

// Errors callers branch on. Every error from Decide means deny.
var (
	// ErrUnknownEntrypoint: the entrypoint is not one of Entrypoints.
	ErrUnknownEntrypoint = errors.New("policies: unknown entrypoint")
	// ErrUndefined: the decision was undefined (no result).
	ErrUndefined = errors.New("policies: decision undefined")
	// ErrMalformedDecision: the result does not have the decision's shape.
	ErrMalformedDecision = errors.New("policies: malformed decision")
	// ErrNoInput: Decide was called without an input document.
	ErrNoInput = errors.New("policies: no input")
)

// Config says where the engine's bundle comes from.
type Config struct {
	// Dir is a bundle directory (.manifest, data.json, *.rego) to load instead
	// of the embedded bundle. Empty (and no BundleFile) means the embedded
	// bundle.
	Dir string
	// BundleFile is a bundle tarball (`sandgate policy build`, `opa build`)
	// to load instead of the embedded bundle.
	BundleFile string
	// BundleData is a bundle tarball in memory (a candidate uploaded for a
	// replay), instead of a directory or file.
	BundleData []byte
	// Verify, when set, is the key that must have signed BundleFile: an
	// unsigned, tampered or otherwise signed bundle is refused.
	Verify *Verification
	// Checks run on the built bundle before it serves, at start and at
	// every reload (the gateway's escape audit); an error refuses it.
	Checks []Check
	// VerifyTests runs the bundle's own Rego tests before it serves; a bundle
	// whose tests fail, or that has none, is refused. Reload always verifies.
	VerifyTests bool
}

// Engine evaluates the bundle's entrypoints. It is safe for concurrent use;
// Reload swaps the whole compiled bundle atomically.
type Engine struct {
	cur atomic.Pointer[compiled]
}

// compiled is one bundle revision, compiled and prepared.
type compiled struct {
	gen      uint64 // unique per build (Generation)
	revision string
	digest   string    // BundleDigest of the files it was built from
	signer   string    // key id that verified its signature; empty if unsigned
	loadedAt time.Time // when it was built
	queries  map[Entrypoint]rego.PreparedEvalQuery
	rules    []Rule
	settings Settings
}

// New loads, compiles and prepares the bundle described by cfg. It fails if
// the bundle does not load or compile, if an entrypoint is missing, or (with
// VerifyTests) if its tests fail.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	c, err := build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{}
	e.cur.Store(c)
	return e, nil
}

// Reload builds a new engine state from cfg beside the serving one, runs the
// bundle's tests, and only then swaps it in. On any error the serving bundle
// keeps serving unchanged.
func (e *Engine) Reload(ctx context.Context, cfg Config) error {
	cfg.VerifyTests = true
	c, err := build(ctx, cfg)
	if err != nil {
		return err
	}
	// The job prefix names every job this gateway owns (H9, L3): jobs
	// already running under the old one would be orphaned.
	if old := e.cur.Load(); old != nil && c.settings.Prefix != old.settings.Prefix {
		return fmt.Errorf("%w: the bundle changes the job prefix from %q to %q, which a reload cannot do (restart the gateway)", ErrReloadRefused, old.settings.Prefix, c.settings.Prefix)
	}
	e.cur.Store(c)
	return nil
}

// Decider is what evaluates decisions: the serving Engine, or a Candidate
// bundle before it serves.
type Decider interface {
	Decide(ctx context.Context, ep Entrypoint, input ast.Value) (Decision, error)
	Settings() Settings
	Revision() string
}

// Check inspects a built bundle before it serves; an error refuses it.
type Check func(ctx context.Context, candidate Decider) error

// Candidate is a built bundle that does not serve yet.
type Candidate struct{ c *compiled }

// Decide evaluates the candidate bundle (see Engine.Decide).
func (b *Candidate) Decide(ctx context.Context, ep Entrypoint, input ast.Value) (Decision, error) {
	return b.c.decide(ctx, ep, input)
}

// Settings are the candidate's thresholds and defaults.
func (b *Candidate) Settings() Settings { return b.c.settings }

// Revision is the candidate's .manifest revision.
func (b *Candidate) Revision() string { return b.c.revision }

// ErrCheck wraps the error of a Check that refused a bundle.
var ErrCheck = errors.New("policies: bundle check refused the bundle")

// ErrReloadRefused means a bundle that would serve on its own cannot
// replace the serving one.
var ErrReloadRefused = errors.New("policies: reload refused")

func build(ctx context.Context, cfg Config) (*compiled, error) {
	src, err := readSource(cfg)
	if err != nil {
		return nil, err
	}
	fsys := src.fsys
	if cfg.VerifyTests {
		if _, err := RunTests(ctx, fsys); err != nil {
			return nil, err
		}
	}
	b, err := loadBundle(fsys, false)
	if err != nil {
		return nil, err
	}
	settings, err := settingsFrom(b.Data)
	if err != nil {
		return nil, err
	}
	rules, err := rulesOf(b)
	if err != nil {
		return nil, err
	}
	if err := applyModes(settings, rules); err != nil {
		return nil, err
	}
	c := &compiled{
		gen:      generations.Add(1),
		revision: b.Manifest.Revision,
		digest:   src.digest,
		signer:   src.signer,
		loadedAt: time.Now().UTC(),
		queries:  make(map[Entrypoint]rego.PreparedEvalQuery, len(Entrypoints)),
		rules:    rules,
		settings: settings,
	}
	for _, ep := range Entrypoints {
		pq, err := rego.New(
			rego.Query(ep.Query()),
			rego.ParsedBundle(BundleName, b),
			rego.StrictBuiltinErrors(true),
			rego.Capabilities(capabilities()),
			// The bundle's data as AST values: otherwise every evaluation
			// converts data.sandgate.config from Go values again (~10 %).
			rego.StoreReadAST(true),
		).PrepareForEval(ctx)
		if err != nil {
			return nil, fmt.Errorf("policies: prepare %s: %w", ep, err)
		}
		c.queries[ep] = pq
	}
	for _, check := range cfg.Checks {
		if err := check(ctx, &Candidate{c: c}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCheck, err)
		}
	}
	return c, nil
}

// Revision is the serving bundle's .manifest revision.
func (e *Engine) Revision() string { return e.cur.Load().revision }

// generations numbers every bundle built in this process.
var generations atomic.Uint64

// Generation identifies the serving bundle: it changes at every reload
// that swaps one in (even of the same revision), so what is derived from a
// bundle (the gateway's /openapi.json) can be cached per generation.
func (e *Engine) Generation() uint64 { return e.cur.Load().gen }

// Info describes the serving bundle, for the reviewers who read it (GET
// /v1/policy): its revision, its digest (BundleDigest), when it was
// loaded, and its annotated rules. Revision, digest and rules always come
// from one bundle, even while a reload swaps it.
type Info struct {
	Revision string
	Digest   string
	// Signer is the key id that verified the bundle's signature; empty
	// when the bundle was not verified (a directory, the embedded bundle).
	Signer   string
	LoadedAt time.Time
	Rules    []Rule
}

// Info returns what describes the serving bundle.
func (e *Engine) Info() Info {
	c := e.cur.Load()
	return Info{Revision: c.revision, Digest: c.digest, Signer: c.signer, LoadedAt: c.loadedAt, Rules: append([]Rule(nil), c.rules...)}
}

// Rules lists the serving bundle's annotated rules, sorted by entrypoint and id.
func (e *Engine) Rules() []Rule {
	return append([]Rule(nil), e.cur.Load().rules...)
}

// Settings returns the thresholds and defaults of the serving bundle's data.
func (e *Engine) Settings() Settings { return e.cur.Load().settings }

// Decide evaluates the entrypoint on input. The returned Decision always
// carries an ID, the entrypoint and the revision, so a failure can be logged;
// a non-nil error means no decision was made and the caller must deny.
func (e *Engine) Decide(ctx context.Context, ep Entrypoint, input ast.Value) (Decision, error) {
	return e.cur.Load().decide(ctx, ep, input)
}

func (c *compiled) decide(ctx context.Context, ep Entrypoint, input ast.Value) (Decision, error) {
	d := Decision{ID: newDecisionID(), Entrypoint: ep, Revision: c.revision}
	pq, ok := c.queries[ep]
	if !ok {
		return d, fmt.Errorf("%w: %q", ErrUnknownEntrypoint, ep)
	}
	if input == nil {
		return d, ErrNoInput
	}
	start := time.Now()
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(input))
	d.Duration = time.Since(start)
	if err != nil {
		return d, fmt.Errorf("policies: evaluate %s: %w", ep, err)
	}
	// OPA watches ctx from another goroutine: a short evaluation on a
	// cancelled context can still return a result.
	if err := ctx.Err(); err != nil {
		return d, fmt.Errorf("policies: evaluate %s: %w", ep, err)
	}
	if err := d.fill(rs); err != nil {
		return d, fmt.Errorf("policies: %s: %w", ep, err)
	}
	return d, nil
}

// newDecisionID returns 16 random bytes as hex.
func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}
