package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/assemble"
	"sandgate/gateway/audit"
	"sandgate/gateway/escape"
	"sandgate/gateway/replay"
	"sandgate/gateway/token"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/policies/watch"
	"sandgate/store"
)

// gatewayOptions is everything `dev` and `serve` turn their flags and
// config file into.
type gatewayOptions struct {
	Listen  string
	TLSCert string
	TLSKey  string
	DataDir string
	// Keys are where the token signing keys come from (default
	// <data>/signing.key).
	Keys     signingKeys
	Issuer   string
	Audience string
	// Policy is where the bundle comes from (a directory, a signed bundle
	// file, or the embedded bundle when empty).
	Policy policies.Config
	// WatchPolicy reloads a directory or bundle file when it changes;
	// SIGHUP reloads it always.
	WatchPolicy bool
	// AcceptEscapes are the escape-audit cases the bundle may admit
	// (logged); any other admitted case refuses the bundle.
	AcceptEscapes []string
	Nomad         nomad.Config
	// Simulated: Nomad is the built-in simulator (Nomad.Address points at it).
	Simulated         bool
	ReaperInterval    time.Duration
	ReconcileInterval time.Duration
	ReclaimInterval   time.Duration
	Retention         time.Duration
	// DecisionRetention is how long the shared decision log of a
	// postgres store keeps a decision (zero: the gateway's default).
	DecisionRetention time.Duration
	// Replica names this gateway among several; LeaseTTL is the
	// background lease's lifetime (zero: the gateway's defaults).
	Replica          string
	LeaseTTL         time.Duration
	StartTimeout     time.Duration
	DecisionLogBytes int64
	DecisionLogKeep  int
	// DecisionInputs keeps the masked inputs in the decision log.
	DecisionInputs bool
	// PolicyLimits bound dry runs and candidate replays (policy.evaluate,
	// policy.replay); runGateway sets the replay worker.
	PolicyLimits gateway.PolicyLimits
	// HTTP are the connection deadlines (zero: the gateway's defaults).
	HTTP httpDeadlines
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed for the per-address rate limit (Q1).
	TrustedProxies []netip.Prefix
	// Nodes are enrolled (or re-enrolled) at start.
	Nodes []store.Node
	// Store is the store driver and its settings; the zero value is the
	// bolt file in DataDir.
	Store assemble.StoreConfig
	// Ready, when set, is called once the listener is open.
	Ready func(addr string, issuer *token.Issuer, st store.Store, s policies.Settings) error
	// ListenHint says how to choose another address when Listen cannot
	// be bound (the flag or the config field of the command).
	ListenHint string
}

// httpDeadlines are the connection deadlines of the API server
// (gateway.Config ReadHeaderTimeout, ReadTimeout, WriteTimeout,
// IdleTimeout); zero means the gateway's default.
type httpDeadlines struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// listenHint is what to do when the listen address cannot be bound.
func (o gatewayOptions) listenHint() string {
	if o.ListenHint != "" {
		return o.ListenHint
	}
	return "choose another address"
}

// signingKeys say where the token signing keys come from: one file (""
// is <data>/signing.key, created when absent), a key directory, or key
// files with the kid of the one that signs (assemble.Config KeyFile,
// KeyDir, KeyFiles, ActiveKID).
type signingKeys struct {
	File      string
	Dir       string
	Files     []string
	ActiveKID string
}

// dataConfig is the gateway's config with the data dir's store and
// signing keys, as `serve`, `dev` and `token mint --offline` open them;
// issuer and audience "" keep the token defaults.
func dataConfig(dataDir string, keys signingKeys, issuer, audience string) assemble.Config {
	c := assemble.DefaultConfig()
	c.DataDir, c.KeyFile, c.KeyDir, c.KeyFiles, c.ActiveKID = dataDir, keys.File, keys.Dir, keys.Files, keys.ActiveKID
	if issuer != "" {
		c.Token.Issuer = issuer
	}
	if audience != "" {
		c.Token.Audience = audience
	}
	return c
}

// openIssuer loads (or creates) the signing keys and builds the token issuer.
func openIssuer(dataDir string, keys signingKeys, issuer, audience string) (*token.Issuer, bool, error) {
	return assemble.OpenIssuer(dataConfig(dataDir, keys, issuer, audience))
}

// openStore opens the data dir's store.
func openStore(ctx context.Context, dataDir string) (store.Store, error) {
	return assemble.OpenStore(ctx, dataConfig(dataDir, signingKeys{}, "", ""))
}

// runGateway compiles the engine (with the escape audit), builds the
// gateway on the data dir through assemble.Open (store, signing key,
// decision log, Nomad client), enrolls the configured nodes, serves the
// API and runs the reaper, reconciliation and bundle reloads until ctx is
// done.
func runGateway(ctx context.Context, o gatewayOptions, logOut io.Writer) error {
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// SIGHUP is taken from the first moment: Go's default for it is to
	// exit, and an operator may signal while the bundle still compiles. A
	// SIGHUP before the gateway listens reloads once it does.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log.Info("sandgate gateway starting", "policy_dir", o.Policy.Dir, "policy_bundle_file", o.Policy.BundleFile)
	// Bind before anything is written: a taken port must not leave a data
	// dir, a key and a store behind.
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w; %s", o.Listen, err, o.listenHint())
	}
	defer func() { _ = ln.Close() }() // Serve closes it too; a second Close is harmless

	// Every bundle, at start and at every reload, passes the escape audit.
	escapeAudit, err := escape.Check(o.AcceptEscapes, func(revision string, f escape.Finding) {
		log.Warn("the policy bundle admits a known-dangerous input, accepted by policy.accept_escapes",
			"case", f.ID, "what", f.What, "rule", f.Rule, "bundle_revision", revision, "decision_id", f.DecisionID)
	})
	if err != nil {
		return fmt.Errorf("policy.accept_escapes: %w", err)
	}
	o.Policy.Checks = append(o.Policy.Checks, escapeAudit)
	policySrc := o.Policy
	policySrc.VerifyTests = policySrc.Dir != "" || policySrc.BundleFile != ""
	engine, err := policies.New(ctx, policySrc)
	if err != nil {
		return fmt.Errorf("policy bundle: %w", err)
	}
	cfg := dataConfig(o.DataDir, o.Keys, o.Issuer, o.Audience)
	if o.Store.Driver != "" {
		cfg.Store = o.Store
	}
	cfg.Engine = engine
	cfg.Audit = audit.Config{MaxBytes: o.DecisionLogBytes, Keep: o.DecisionLogKeep}
	cfg.Nomad, cfg.ObserveNomad = o.Nomad, true
	// A candidate bundle is replayed by this binary re-executed as a
	// bounded worker, never in this process.
	policyLimits := o.PolicyLimits
	policyLimits.ReplayWorker = replay.SelfCommand()
	cfg.Gateway = gateway.Config{
		Logger: log, ReaperInterval: o.ReaperInterval, ReconcileInterval: o.ReconcileInterval,
		ReclaimInterval: o.ReclaimInterval, Retention: o.Retention, DecisionRetention: o.DecisionRetention, StartTimeout: o.StartTimeout,
		Replica: o.Replica, LeaseTTL: o.LeaseTTL,
		Simulated: o.Simulated, Version: version, LogInputs: o.DecisionInputs, Policy: policyLimits, TrustedProxies: o.TrustedProxies,
		ReadHeaderTimeout: o.HTTP.ReadHeader, ReadTimeout: o.HTTP.Read, WriteTimeout: o.HTTP.Write, IdleTimeout: o.HTTP.Idle,
	}
	g, err := assemble.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	srv := g.Server
	log.Info("token signing keys loaded", "active_kid", g.Issuer.KeyID(), "kids", g.Issuer.KeyIDs())
	// Nodes of the configuration are enrolled through the hosts decision,
	// like an operator's PUT: a control plane (P2) or an egress node without
	// the isolation bundle (I5) stops the start with the rule that refused.
	for _, n := range o.Nodes {
		req := gateway.EnrollRequest{
			Node: n.Name, Egress: n.Enrollment == engine.Settings().Placement.EgressEnrollment,
			Budget: map[string]int64{},
		}
		// A zero figure in the configuration means the policy default.
		for k, v := range map[string]int64{"max_sandboxes": n.MaxSandboxes, "cpu_mhz": n.CPUMHz, "memory_mb": n.MemoryMB} {
			if v != 0 {
				req.Budget[k] = v
			}
		}
		if err := srv.Enroll(ctx, req); err != nil {
			return fmt.Errorf("enroll %s: %w", n.Name, err)
		}
	}

	hs := srv.HTTPServer()
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("tls: %w", err)
		}
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	if o.Ready != nil {
		if err := o.Ready(ln.Addr().String(), g.Issuer, g.Store, engine.Settings()); err != nil {
			_ = ln.Close()
			return err
		}
	}
	log.Info("sandgate gateway listening", "addr", ln.Addr().String(), "tls", o.TLSCert != "",
		"bundle_revision", engine.Revision(), "nomad", o.Nomad.Address, "simulated", o.Simulated, "data", o.DataDir)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// SIGHUP reloads the signing keys, then the bundle.
	reloads := reloadPolicy(runCtx, reloadKeysOnHUP(runCtx, hup, cfg, g.Issuer, log), engine, o.Policy, o.WatchPolicy, srv, log)
	loops := make(chan struct{})
	go func() { srv.Run(runCtx); close(loops) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			stop()
			<-loops
			return err
		}
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	stop()
	<-loops
	<-reloads
	return nil
}

// reloadKeysOnHUP reloads the token signing keys of a signing_key_dir or
// signing_key_files (assemble.ReloadKeys) on every signal received on hup
// until ctx is done, and then passes the signal on, on the channel it
// returns, to the bundle's reload. A set that cannot be read or used is
// logged and the old one verifies on; keys from one signing_key_file are
// not reloaded (another key there is a restart).
func reloadKeysOnHUP(ctx context.Context, hup <-chan os.Signal, cfg assemble.Config, iss *token.Issuer, log *slog.Logger) <-chan os.Signal {
	out := make(chan os.Signal, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-hup:
				switch ok, err := assemble.ReloadKeys(cfg, iss); {
				case err != nil:
					log.Error("token signing keys refused; the old set verifies on", "reason", err.Error(), "active_kid", iss.KeyID())
				case ok:
					log.Info("token signing keys reloaded", "cause", "SIGHUP", "active_kid", iss.KeyID(), "kids", iss.KeyIDs())
				}
				select {
				case out <- sig:
				default: // a reload is already pending; it reads the bundle anew
				}
			}
		}
	}()
	return out
}

// reloadPolicy reloads the bundle on SIGHUP (received on hup) and, with watchFiles, when
// its directory or file changes, until ctx is done; the returned channel
// closes when it has stopped. Every reload is logged with its time; a
// refused bundle is logged with its reason while the old one serves on.
// With the embedded bundle SIGHUP is only logged: it cannot change.
func reloadPolicy(ctx context.Context, hup <-chan os.Signal, engine *policies.Engine, src policies.Config, watchFiles bool, srv *gateway.Server, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	trigger := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if src.Dir == "" && src.BundleFile == "" {
					log.Warn("SIGHUP: the embedded policy bundle cannot be reloaded; serve policy.dir or policy.bundle_file to reload", "bundle_revision", engine.Revision())
					continue
				}
				select {
				case trigger <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	if src.Dir == "" && src.BundleFile == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		err := watch.Run(ctx, watch.Config{Engine: engine, Source: src, Watch: watchFiles, Report: func(r watch.Result) {
			srv.ObservePolicyReload(r.Cause, r.Took, r.Err != nil)
			if r.Err != nil {
				log.Error("policy bundle refused; the serving bundle is unchanged", "cause", r.Cause, "reason", r.Err.Error(),
					"bundle_revision", r.Revision, "bundle_digest", r.Digest, "took_ms", r.Took.Milliseconds())
				return
			}
			log.Info("policy bundle reloaded", "cause", r.Cause, "bundle_revision", r.Revision, "bundle_digest", r.Digest,
				"took_ms", r.Took.Milliseconds())
		}}, trigger)
		if err != nil {
			log.Error("policy reload is off", "reason", err.Error())
		}
	}()
	return done
}
