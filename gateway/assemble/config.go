package assemble

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"sandgate/gateway"
	"sandgate/gateway/audit"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
	"sandgate/store/bolt"
	"sandgate/store/postgres"
)

// The files Open keeps in Config.DataDir unless told another path.
const (
	// StoreFile is the bbolt store of the bolt driver.
	StoreFile = "sandgate.db"
	// DecisionLogFile is the decision log (docs/api.md, "Decision log").
	DecisionLogFile = "decisions.jsonl"
	// KeyFile is the Ed25519 signing key, created 0600 when absent.
	KeyFile = "signing.key"
)

// Config is everything Open builds a gateway from. Start from
// DefaultConfig; the zero value of a field takes the default its comment
// names.
type Config struct {
	// DataDir holds StoreFile, DecisionLogFile and KeyFile unless their
	// own paths say otherwise. Required.
	DataDir string

	// Engine is the policy engine, compiled by the caller (the CLI adds
	// the escape audit to its checks and reloads it). Required.
	Engine *policies.Engine

	// Store says which store the gateway keeps its records in.
	Store StoreConfig
	// WrapStore, when set, wraps the store the server uses (tests inject
	// faults with it); Gateway.Store stays the bare one, and Close closes
	// that.
	WrapStore func(store.Store) store.Store

	// Token is the issuer's config (token.DefaultConfig: issuer
	// "sandgate", audience "sandgate-api", a 30 s leeway). Its Key, when
	// set, signs as it is, with its VerifyKeys verifying too, and no key
	// file is read or written; when empty the keys come from KeyDir,
	// KeyFiles or KeyFile, and VerifyKeys must be empty.
	Token token.Config
	// KeyFile is the signing key's file, loaded or, when absent, created
	// (token.LoadOrCreateKey): a key set of one. "" is
	// <DataDir>/signing.key unless Token.Key, KeyDir or KeyFiles gives
	// the keys; it must be "" when one of them does.
	KeyFile string
	// KeyDir is a key directory (token.ReadKeyDir): every key of its key
	// files (*.pem, 0600 PKCS#8 Ed25519, one key or several a file)
	// verifies tokens and the one its
	// "active" file names signs them. Nothing in it is created; `sandgate
	// key generate` and `sandgate key activate` prepare it. Replicas given
	// copies of one directory sign and verify alike (docs/runbook.md,
	// "Rotate the signing key").
	KeyDir string
	// KeyFiles are key files that form the key set, as LoadKeys reads
	// each (one key or several a file); none is created. ActiveKID names
	// the one that signs (`sandgate key list` shows kids); it may be ""
	// with one key.
	KeyFiles []string
	// ActiveKID is the kid (token.KeyID) of the key of KeyFiles that
	// signs; one that none of them has refuses the start. Only with
	// KeyFiles: a KeyDir names its active key in its "active" file.
	ActiveKID string

	// Audit is the decision log's config; an empty Path is
	// <DataDir>/decisions.jsonl.
	Audit audit.Config

	// Nomad is the Nomad client's config. Its JobPrefix is always the
	// engine's (Settings().Prefix, H9): Open sets it, and refuses another.
	Nomad nomad.Config
	// ObserveNomad feeds the Nomad client's call timings and errors to
	// the server's ObserveNomad (the sandgate_nomad_* metrics), after
	// Nomad.Observe when that is set too.
	ObserveNomad bool

	// Gateway is the server's config. Open fills Engine, Store, Nomad,
	// Tokens and Decisions with the parts it opens (they must be left
	// nil) and Namespace with Nomad.Namespace (it must be "" or the
	// same); the caller sets the rest.
	Gateway gateway.Config
	// AdjustGateway, when set, is called with the server's config once
	// Open has filled it, just before gateway.New (tests wrap a part
	// with it, e.g. a Nomad that garbles answers).
	AdjustGateway func(*gateway.Config)
}

// StoreConfig says which store the gateway keeps its records in.
type StoreConfig struct {
	// Driver names the implementation: DriverBolt, the default for "", or
	// DriverPostgres. An unknown name is refused.
	Driver string
	// Path is the bolt driver's file; "" is <DataDir>/sandgate.db.
	Path string
	// Bolt are the bolt driver's options: how long to wait for the
	// file's lock (bolt.DefaultTimeout, 1 s) and the rest.
	Bolt bolt.Options
	// DSN is the postgres driver's database (a postgres:// URL or
	// key=value pairs); required for it, refused for the others.
	DSN string
	// Postgres are the postgres driver's options: pool size, connect and
	// statement timeouts.
	Postgres postgres.Options
}

// The store drivers.
const (
	// DriverBolt is the bbolt store (store/bolt) in one file of the data
	// dir: one gateway.
	DriverBolt = "bolt"
	// DriverPostgres is a PostgreSQL database (store/postgres) that
	// several gateways share.
	DriverPostgres = "postgres"
)

// DefaultConfig returns the bolt store with its default lock wait, the
// token issuer's defaults and nomad.DefaultConfig (whose Address is left
// empty: it has no safe default). DataDir and Engine are left to the
// caller; the paths follow DataDir. It reads no environment.
func DefaultConfig() Config {
	return Config{
		Store: StoreConfig{Driver: DriverBolt, Bolt: bolt.Options{Timeout: bolt.DefaultTimeout}},
		Token: token.DefaultConfig(),
		Nomad: nomad.DefaultConfig(),
	}
}

// withDefaults fills what follows from DataDir and Engine.
func (c Config) withDefaults() Config {
	if c.Store.Driver == "" {
		c.Store.Driver = DriverBolt
	}
	if len(c.Token.Key) == 0 && c.KeyFile == "" && c.KeyDir == "" && len(c.KeyFiles) == 0 && c.DataDir != "" {
		c.KeyFile = filepath.Join(c.DataDir, KeyFile)
	}
	if c.Audit.Path == "" && c.DataDir != "" {
		c.Audit.Path = filepath.Join(c.DataDir, DecisionLogFile)
	}
	return c
}

// configErr is a refused Config; field is the field's name as an
// operator's configuration spells it where it has one (store.driver).
func configErr(field, format string, args ...any) error {
	return fmt.Errorf("assemble: config: %s: %s", field, fmt.Sprintf(format, args...))
}

// validate refuses a Config (defaults applied) that Open cannot build from,
// before anything is opened or written.
func (c Config) validate() error {
	if c.DataDir == "" {
		return configErr("DataDir", "required")
	}
	if c.Engine == nil {
		return configErr("Engine", "required (the caller compiles the policy bundle)")
	}
	if err := c.Store.validate(); err != nil {
		return err
	}
	if err := c.validateSigning(); err != nil {
		return err
	}
	if p := c.Engine.Settings().Prefix; c.Nomad.JobPrefix != "" && c.Nomad.JobPrefix != p {
		return configErr("Nomad.JobPrefix", "%q is not the policy's job prefix %q; leave it empty, Open sets it (H9)", c.Nomad.JobPrefix, p)
	}
	g := c.Gateway
	var filled []string
	for name, set := range map[string]bool{
		"Engine": g.Engine != nil, "Store": g.Store != nil, "Nomad": g.Nomad != nil,
		"Tokens": g.Tokens != nil, "Decisions": g.Decisions != nil,
	} {
		if set {
			filled = append(filled, "Gateway."+name)
		}
	}
	if len(filled) > 0 {
		slices.Sort(filled)
		return configErr(strings.Join(filled, ", "), "set, but Open fills it with the part it opens; leave it nil")
	}
	if g.Namespace != "" && g.Namespace != c.Nomad.Namespace {
		return configErr("Gateway.Namespace", "%q is not the Nomad client's namespace %q; leave it empty, Open sets it", g.Namespace, c.Nomad.Namespace)
	}
	return nil
}

// validateSigning refuses keys that come from two places, or from none, and
// an ActiveKID without the KeyFiles it picks from.
func (c Config) validateSigning() error {
	var from []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"Token.Key", len(c.Token.Key) != 0}, {"KeyFile", c.KeyFile != ""}, {"KeyDir", c.KeyDir != ""}, {"KeyFiles", len(c.KeyFiles) != 0}} {
		if f.set {
			from = append(from, f.name)
		}
	}
	switch {
	case len(from) > 1:
		return configErr(strings.Join(from, ", "), "set together; the keys come from one place")
	case len(from) == 0:
		return configErr("KeyFile", "required without Token.Key, KeyDir or KeyFiles (DataDir gives the default)")
	case len(c.Token.VerifyKeys) != 0 && len(c.Token.Key) == 0:
		return configErr("Token.VerifyKeys", "set without Token.Key; with %s the verification keys come from there", from[0])
	case c.ActiveKID != "" && len(c.KeyFiles) == 0:
		return configErr("ActiveKID", "set without KeyFiles; a KeyDir names its active key in its %q file", token.ActiveFile)
	case len(c.KeyFiles) > token.MaxKeys:
		return configErr("KeyFiles", "%d files, at most %d keys", len(c.KeyFiles), token.MaxKeys)
	}
	return nil
}

// validate refuses an unknown driver, and settings of one driver given to
// another (a DSN with the bolt driver would be silently ignored).
func (s StoreConfig) validate() error {
	if _, ok := drivers[s.Driver]; !ok {
		known := make([]string, 0, len(drivers))
		for name := range drivers {
			known = append(known, name)
		}
		slices.Sort(known)
		return configErr("store.driver", "unknown driver %q (known: %s)", s.Driver, strings.Join(known, ", "))
	}
	switch {
	case s.Driver == DriverPostgres && s.DSN == "":
		return configErr("store.dsn", "required by the postgres driver")
	case s.Driver != DriverPostgres && s.DSN != "":
		return configErr("store.dsn", "set, but store.driver is %q; the DSN belongs to the postgres driver", s.Driver)
	case s.Driver == DriverPostgres && s.Path != "":
		return configErr("store.path", "set, but the postgres driver keeps no file")
	}
	return nil
}
