// Package assemble is the gateway's one composition root: Open builds the
// server and its parts (the store, the token issuer and its signing key,
// the decision log, the Nomad client) from one Config, for `sandgate
// serve` and `sandgate dev` (cmd/sandgate) and for the in-process gateway
// of the tests (gateway/gatewaytest) alike, so a change of wiring is made
// once. What is the binary's own (the listener, TLS, the escape audit and
// bundle reloads, node enrollment, serving) stays in cmd/sandgate; what is
// the tests' own (the simulator, the clock, the httptest listener, the
// nodes put into the store) stays in gatewaytest.
//
// It imports no command and no test code; the gateway never imports it
// (it is what assemble builds). The files it keeps in the data dir are
// those of docs/runbook.md ("data_dir").
package assemble

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/audit"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// Gateway is a server and the parts Open built it from. Close closes what
// needs closing.
type Gateway struct {
	// Server is the gateway; the caller serves Server.HTTPServer() or
	// Server.Handler() and runs Server.Run.
	Server *gateway.Server
	// Engine is Config.Engine.
	Engine *policies.Engine
	// Store is the store as opened, not wrapped (Config.WrapStore).
	Store store.Store
	// ServerStore is the store the server uses: Config.WrapStore(Store),
	// or Store itself.
	ServerStore store.Store
	// Issuer mints and verifies the gateway's tokens.
	Issuer *token.Issuer
	// Decisions is the decision log.
	Decisions *audit.Log
	// Nomad is the Nomad client the server uses (before any
	// Config.AdjustGateway wraps it).
	Nomad *nomad.Client

	closeOnce sync.Once
}

// Open validates cfg, then opens the parts in order (the signing key and
// the issuer, the store, the decision log, the Nomad client) and builds
// the server on them. A refused Config writes nothing. When a part fails,
// what was already opened is closed before Open returns the error (a key
// file it created stays); the error of a part is returned as that part
// words it, the key's and the Nomad client's with what they are.
func Open(ctx context.Context, cfg Config) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{Engine: cfg.Engine}
	if err := g.open(ctx, cfg); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// open fills g part by part; Open closes what it filled when it fails.
func (g *Gateway) open(ctx context.Context, cfg Config) error {
	var err error
	if g.Issuer, _, err = OpenIssuer(cfg); err != nil {
		return err
	}
	if g.Store, err = OpenStore(ctx, cfg); err != nil {
		return err
	}
	g.ServerStore = g.Store
	if cfg.WrapStore != nil {
		g.ServerStore = cfg.WrapStore(g.Store)
	}
	if cfg.Gateway.Replica == "" {
		cfg.Gateway.Replica = gateway.DefaultReplica()
	}
	cfg.Audit.Replica = cfg.Gateway.Replica
	// On a store the replicas share, so is the decision log: a query
	// answers for the whole deployment.
	if shared, ok := g.Store.(store.DecisionLog); ok {
		cfg.Audit.Shared = shared
	}
	if g.Decisions, err = audit.Open(cfg.Audit); err != nil {
		return err
	}

	ncfg := cfg.Nomad
	ncfg.JobPrefix = cfg.Engine.Settings().Prefix
	// The server exists only once the client does: the hook reaches it
	// through srv, set below, and drops what comes before.
	var srv atomic.Pointer[gateway.Server]
	if cfg.ObserveNomad {
		own := ncfg.Observe
		ncfg.Observe = func(op string, d time.Duration, err error) {
			if own != nil {
				own(op, d, err)
			}
			if s := srv.Load(); s != nil {
				s.ObserveNomad(op, d, err)
			}
		}
	}
	if g.Nomad, err = nomad.New(ncfg); err != nil {
		return fmt.Errorf("nomad client: %w", err)
	}

	gcfg := cfg.Gateway
	gcfg.Engine, gcfg.Store, gcfg.Nomad, gcfg.Tokens, gcfg.Decisions = cfg.Engine, g.ServerStore, g.Nomad, g.Issuer, g.Decisions
	// Jobs are rendered into the namespace the client may register in.
	gcfg.Namespace = ncfg.Namespace
	if cfg.AdjustGateway != nil {
		cfg.AdjustGateway(&gcfg)
	}
	if g.Server, err = gateway.New(gcfg); err != nil {
		return err
	}
	srv.Store(g.Server)
	return nil
}

// Close closes the server (its background work), then the decision log,
// then the store, each only if Open got that far; it does so once, later
// calls do nothing, and Close of a nil Gateway does nothing either. The
// caller stops serving and Server.Run first.
func (g *Gateway) Close() {
	if g == nil {
		return
	}
	g.closeOnce.Do(func() {
		if g.Server != nil {
			g.Server.Close()
		}
		if g.Decisions != nil {
			_ = g.Decisions.Close()
		}
		if g.Store != nil {
			_ = g.Store.Close()
		}
	})
}

// OpenIssuer builds the token issuer of c alone: c.Token as it is when
// its Key is set; else with the key set of c.KeyDir (its "active" file
// names the signing key) or of c.KeyFiles (c.ActiveKID names it); else
// with the key loaded from c.KeyFile (by default <DataDir>/signing.key)
// or, when no file is there, generated and written 0600 (created is then
// true), a set of one. `sandgate token mint --offline` mints with it while
// no gateway runs. A key file with a looser mode or other content is
// refused (token.ErrKeyPermissions, token.ErrKeyInvalid), and so is a set
// without a signing key or with an active kid none of its keys has
// (token.ErrKeySet).
func OpenIssuer(c Config) (iss *token.Issuer, created bool, err error) {
	c = c.withDefaults()
	if err := c.validateSigning(); err != nil {
		return nil, false, err
	}
	tcfg := c.Token
	if len(tcfg.Key) == 0 {
		if tcfg.Key, tcfg.VerifyKeys, created, err = loadKeys(c); err != nil {
			return nil, false, err
		}
	}
	iss, err = token.New(tcfg)
	return iss, created, err
}

// ReloadKeys reads c's key set again, from c.KeyDir or c.KeyFiles, and
// gives it to iss (token.Issuer.SetKeys): the gateway's SIGHUP. It reports
// false, and does nothing, for keys from Token.Key or KeyFile (a set of
// one: another key there is a restart, docs/runbook.md). A set it cannot
// read or that SetKeys refuses is returned as an error, and iss keeps the
// set it had.
func ReloadKeys(c Config, iss *token.Issuer) (bool, error) {
	c = c.withDefaults()
	if err := c.validateSigning(); err != nil {
		return false, err
	}
	if c.KeyDir == "" && len(c.KeyFiles) == 0 {
		return false, nil
	}
	key, verify, _, err := loadKeys(c)
	if err != nil {
		return false, err
	}
	if err := iss.SetKeys(key, verify); err != nil {
		return false, err
	}
	return true, nil
}

// loadKeys reads the key set of a validated c without Token.Key: the keys
// of KeyDir, or of KeyFiles, or the one of KeyFile, created when absent
// (token.LoadOrCreateKey).
func loadKeys(c Config) (key ed25519.PrivateKey, verify []ed25519.PublicKey, created bool, err error) {
	switch {
	case c.KeyDir != "":
		d, err := token.ReadKeyDir(c.KeyDir)
		if err != nil {
			return nil, nil, false, fmt.Errorf("signing key dir %s: %w", c.KeyDir, err)
		}
		if key, verify, err = d.Select(); err != nil {
			return nil, nil, false, fmt.Errorf("signing key dir %s: %w", c.KeyDir, err)
		}
	case len(c.KeyFiles) != 0:
		var keys []ed25519.PrivateKey
		for _, f := range c.KeyFiles {
			ks, err := token.LoadKeys(f)
			if err != nil {
				return nil, nil, false, fmt.Errorf("signing key files: %w", err)
			}
			keys = append(keys, ks...)
		}
		if key, verify, err = token.SelectActive(keys, c.ActiveKID); err != nil {
			return nil, nil, false, fmt.Errorf("signing key files (ActiveKID %q): %w", c.ActiveKID, err)
		}
	default:
		if key, created, err = token.LoadOrCreateKey(c.KeyFile); err != nil {
			return nil, nil, false, fmt.Errorf("signing key %s: %w", c.KeyFile, err)
		}
	}
	return key, verify, created, nil
}
