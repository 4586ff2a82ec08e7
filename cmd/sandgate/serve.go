package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway"
	"sandgate/gateway/assemble"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// serveConfig is the production configuration file (JSON). Every field is
// documented in docs/runbook.md; unknown fields are refused.
type serveConfig struct {
	// Listen is the address the API listens on, e.g. "0.0.0.0:8443".
	Listen string `json:"listen"`
	// TLS: certificate and key files (PEM). Both or neither.
	TLS struct {
		CertFile string `json:"cert_file"`
		KeyFile  string `json:"key_file"`
	} `json:"tls"`
	// DataDir holds sandgate.db, decisions.jsonl and (by default) signing.key.
	DataDir string `json:"data_dir"`
	// Store is where the records live: "bolt" (the default), one file in
	// data_dir for one gateway; or "postgres", one database that several
	// gateways share.
	Store struct {
		Driver string `json:"driver"`
		// DSN is the postgres driver's database, a postgres:// URL. Keep
		// the password out of this file: put the whole DSN in the
		// SANDGATE_STORE_DSN environment variable (which takes the place
		// of dsn) or in dsn_file, or the password alone in PGPASSWORD or
		// a .pgpass file.
		DSN string `json:"dsn"`
		// DSNFile holds the DSN (a mounted secret, a Nomad template).
		DSNFile string `json:"dsn_file"`
		// MaxConns bounds the records' connection pool (default 16);
		// LogConns the shared decision log's own pool (default 4), so a
		// replica opens at most MaxConns+LogConns connections;
		// StatementTimeout each statement and lock wait (default "5s");
		// ConnectTimeout making a connection (default "5s").
		MaxConns         int32    `json:"max_conns"`
		LogConns         int32    `json:"log_conns"`
		StatementTimeout duration `json:"statement_timeout"`
		ConnectTimeout   duration `json:"connect_timeout"`
	} `json:"store"`
	// SigningKeyFile is the Ed25519 token signing key (PKCS#8 PEM, mode
	// 0600); created on first start when absent. Default <data_dir>/signing.key.
	SigningKeyFile string `json:"signing_key_file"`
	// SigningKeyDir is a key directory instead (`sandgate key`): every
	// *.pem key in it verifies tokens, the one its "active" file names
	// signs them. Never created; read again on SIGHUP. Replicas share
	// copies of it.
	SigningKeyDir string `json:"signing_key_dir"`
	// SigningKeyFiles are key files instead, each verifying tokens;
	// SigningKeyActiveKID is the kid of the one that signs (`sandgate key
	// list`), required with more than one file.
	SigningKeyFiles     []string `json:"signing_key_files"`
	SigningKeyActiveKID string   `json:"signing_key_active_kid"`
	// TokenIssuer and TokenAudience are the iss and aud of every token.
	TokenIssuer   string `json:"token_issuer"`
	TokenAudience string `json:"token_audience"`
	// PolicyDir is a bundle directory to serve instead of the embedded one;
	// its own tests must pass before it serves. Older name of policy.dir.
	PolicyDir string `json:"policy_dir"`
	// Policy is where the bundle comes from and how it is reloaded.
	Policy struct {
		// Dir is a bundle directory; BundleFile a bundle tarball
		// (`sandgate policy build`). At most one; neither means the
		// embedded bundle.
		Dir        string `json:"dir"`
		BundleFile string `json:"bundle_file"`
		// VerificationKey is a PEM public key file: the bundle file must
		// be signed by it, at start and at every reload.
		VerificationKey string `json:"verification_key"`
		// VerificationKeyID is the key id the signature must name
		// (default "sandgate"); VerificationAlg the JWS algorithm
		// (default: the key's own).
		VerificationKeyID string `json:"verification_key_id"`
		VerificationAlg   string `json:"verification_alg"`
		// Watch reloads the bundle when its files change (default true
		// for a directory or a bundle file); SIGHUP always reloads.
		Watch *bool `json:"watch"`
		// AcceptEscapes are escape-audit case ids (sandgate policy
		// audit) the bundle may admit; each admitted one is logged at
		// every start and reload. Empty: a bundle admitting any is refused.
		AcceptEscapes []string `json:"accept_escapes"`
		// Evaluate bounds dry runs (POST /v1/policy/evaluate): how long one
		// evaluates (default "2s"), its body (default 262144 bytes) and how
		// many run at once (default 2).
		Evaluate struct {
			Timeout     duration `json:"timeout"`
			MaxBytes    int64    `json:"max_bytes"`
			Concurrency int      `json:"concurrency"`
		} `json:"evaluate"`
		// Replay bounds candidate replays (POST /v1/policy/replay), each run
		// by a worker process: its wall-clock time (default "60s"), the
		// candidate's size (default 4194304 bytes), replays at once (default
		// 1), the worker's memory (RLIMIT_DATA, default 1073741824 bytes)
		// and CPU time (RLIMIT_CPU, default "60s").
		Replay struct {
			Timeout     duration `json:"timeout"`
			MaxBytes    int64    `json:"max_bytes"`
			Concurrency int      `json:"concurrency"`
			MemoryBytes int64    `json:"memory_bytes"`
			CPUTime     duration `json:"cpu_time"`
		} `json:"replay"`
	} `json:"policy"`
	Nomad struct {
		Address string `json:"address"`
		// TokenFile holds the Nomad ACL token (never put the token itself here).
		TokenFile     string `json:"token_file"`
		Region        string `json:"region"`
		Namespace     string `json:"namespace"`
		CACert        string `json:"ca_cert"`
		ClientCert    string `json:"client_cert"`
		ClientKey     string `json:"client_key"`
		TLSServerName string `json:"tls_server_name"`
		// Timeout per Nomad call, e.g. "10s".
		Timeout duration `json:"timeout"`
	} `json:"nomad"`
	// ReaperInterval (L1, default "30s") and ReconcileInterval (L4, default "5m").
	ReaperInterval    duration `json:"reaper_interval"`
	ReconcileInterval duration `json:"reconcile_interval"`
	// ReclaimInterval is the usage monitor's period (R2, R3; default "30s").
	ReclaimInterval duration `json:"reclaim_interval"`
	// Replica names this gateway among the replicas of one deployment
	// (default: its host name and process id): in its decision-log lines,
	// /readyz and the background lease.
	Replica string `json:"replica"`
	// LeaseTTL is how long the background lease (reaper, reconcile, usage
	// monitor: one replica at a time on a postgres store) lasts without
	// renewal (default: two thirds of the shorter of reaper_interval and
	// reclaim_interval, so another replica takes over within one interval).
	LeaseTTL duration `json:"lease_ttl"`
	// Retention is how long ended and failed sandbox records are kept
	// after they end (default "168h"; "-1s" keeps them forever). The
	// decision log keeps the audit trail of pruned sandboxes.
	Retention duration `json:"retention"`
	// StartTimeout is how long a sandbox may stay starting (its allocation
	// placed but not running) before it is failed, its job purged and its
	// budget released (default "5m").
	StartTimeout duration `json:"start_timeout"`
	// HTTP are the API server's connection deadlines (docs/runbook.md):
	// ReadHeaderTimeout (default "10s") bounds a request's headers;
	// ReadTimeout (default "30s") the time spent waiting for a request's
	// body (408 past it; a file upload restarts it with every 64 KiB);
	// WriteTimeout (default "30s") each write of an answer to a client
	// that does not read; IdleTimeout (default "2m") a kept-alive
	// connection between requests.
	HTTP struct {
		ReadHeaderTimeout duration `json:"read_header_timeout"`
		ReadTimeout       duration `json:"read_timeout"`
		WriteTimeout      duration `json:"write_timeout"`
		IdleTimeout       duration `json:"idle_timeout"`
	} `json:"http"`
	// TrustedProxies are the reverse proxies (CIDRs or addresses) whose
	// X-Forwarded-For names the client of a route without a token, for its
	// per-address rate limit (Q1). Empty: the peer's address is the client's.
	TrustedProxies []string `json:"trusted_proxies"`
	// DecisionLog rotation: size in bytes and rotated files kept.
	DecisionLog struct {
		MaxBytes int64 `json:"max_bytes"`
		Keep     int   `json:"keep"`
		// IncludeInputs keeps each decision's input, masked, for replay.
		IncludeInputs bool `json:"include_inputs"`
		// Retention is how long the shared decision log (the postgres
		// store's, which every replica writes and GET /v1/decisions
		// reads) keeps a decision (default "720h"; "-1s" keeps them
		// forever). The file rotates by size instead.
		Retention duration `json:"retention"`
	} `json:"decision_log"`
	// Nodes are enrolled at every start (until the hosts API manages them).
	Nodes []struct {
		Name         string `json:"name"`
		Egress       bool   `json:"egress"`
		MaxSandboxes int64  `json:"max_sandboxes"`
		CPUMHz       int64  `json:"cpu_mhz"`
		MemoryMB     int64  `json:"memory_mb"`
	} `json:"nodes"`
}

// duration reads "30s"-style strings.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// serveOverrides are serve's flags that take the place of fields of the
// file: what tells the replicas of one configuration apart.
type serveOverrides struct {
	Listen, Replica string
}

func loadServeConfig(path string, over serveOverrides) (gatewayOptions, error) {
	var o gatewayOptions
	data, err := os.ReadFile(path)
	if err != nil {
		return o, err
	}
	var c serveConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	if over.Listen != "" {
		c.Listen = over.Listen
	}
	if over.Replica != "" {
		c.Replica = over.Replica
	}
	var problems []string
	if c.Listen == "" {
		problems = append(problems, "listen is required")
	}
	if c.DataDir == "" {
		problems = append(problems, "data_dir is required")
	}
	if c.Nomad.Address == "" {
		problems = append(problems, "nomad.address is required")
	}
	storeCfg, storeProblems := c.storeConfig()
	problems = append(problems, storeProblems...)
	if c.PolicyDir != "" && c.Policy.Dir != "" {
		problems = append(problems, "policy_dir and policy.dir name the same thing; keep policy.dir")
	}
	if c.Policy.Dir == "" {
		c.Policy.Dir = c.PolicyDir
	}
	if c.Policy.Dir != "" && c.Policy.BundleFile != "" {
		problems = append(problems, "policy.dir and policy.bundle_file: give one")
	}
	if c.Policy.VerificationKey != "" && c.Policy.BundleFile == "" {
		problems = append(problems, "policy.verification_key verifies a policy.bundle_file, and none is given")
	}
	for _, d := range []struct {
		name string
		d    duration
	}{{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout}, {"http.read_timeout", c.HTTP.ReadTimeout},
		{"http.write_timeout", c.HTTP.WriteTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout}} {
		if d.d < 0 {
			problems = append(problems, d.name+" must be positive (or absent for its default)")
		}
	}
	if n := countSet(c.SigningKeyFile != "", c.SigningKeyDir != "", len(c.SigningKeyFiles) > 0); n > 1 {
		problems = append(problems, "signing_key_file, signing_key_dir and signing_key_files: give one")
	}
	if c.SigningKeyActiveKID != "" && len(c.SigningKeyFiles) == 0 {
		problems = append(problems, "signing_key_active_kid picks one of signing_key_files, and none is given (a signing_key_dir names its active key in its \"active\" file)")
	}
	if len(c.SigningKeyFiles) > 1 && c.SigningKeyActiveKID == "" {
		problems = append(problems, "signing_key_files has several keys: signing_key_active_kid must name the one that signs (sandgate key list shows kids)")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		problems = append(problems, "tls.cert_file and tls.key_file go together")
	}
	var proxies []netip.Prefix
	for _, p := range c.TrustedProxies {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				problems = append(problems, fmt.Sprintf("trusted_proxies: %q is neither a CIDR nor an address", p))
				continue
			}
			pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		proxies = append(proxies, pfx.Masked())
	}
	if len(problems) > 0 {
		return o, fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))
	}
	nc := nomad.DefaultConfig()
	nc.Address, nc.Region, nc.Namespace = c.Nomad.Address, c.Nomad.Region, c.Nomad.Namespace
	nc.TLS = nomad.TLSConfig{CACert: c.Nomad.CACert, ClientCert: c.Nomad.ClientCert, ClientKey: c.Nomad.ClientKey, ServerName: c.Nomad.TLSServerName}
	if c.Nomad.Timeout > 0 {
		nc.Timeout = time.Duration(c.Nomad.Timeout)
	}
	if c.Nomad.TokenFile != "" {
		tok, err := os.ReadFile(c.Nomad.TokenFile)
		if err != nil {
			return o, fmt.Errorf("nomad.token_file: %w", err)
		}
		nc.Token = strings.TrimSpace(string(tok))
	}
	policy := policies.Config{Dir: c.Policy.Dir, BundleFile: c.Policy.BundleFile}
	if c.Policy.VerificationKey != "" {
		key, err := os.ReadFile(c.Policy.VerificationKey)
		if err != nil {
			return o, fmt.Errorf("policy.verification_key: %w", err)
		}
		policy.Verify = &policies.Verification{KeyPEM: string(key), KeyID: c.Policy.VerificationKeyID, Algorithm: c.Policy.VerificationAlg}
	}
	watch := c.Policy.Watch == nil || *c.Policy.Watch
	o = gatewayOptions{
		Listen: c.Listen, ListenHint: "is another gateway running? Set another address in the config file's listen field", TLSCert: c.TLS.CertFile, TLSKey: c.TLS.KeyFile, DataDir: c.DataDir,
		Keys:   signingKeys{File: c.SigningKeyFile, Dir: c.SigningKeyDir, Files: c.SigningKeyFiles, ActiveKID: c.SigningKeyActiveKID},
		Issuer: c.TokenIssuer, Audience: c.TokenAudience,
		Policy: policy, WatchPolicy: watch, AcceptEscapes: c.Policy.AcceptEscapes, Nomad: nc,
		ReaperInterval: time.Duration(c.ReaperInterval), ReconcileInterval: time.Duration(c.ReconcileInterval),
		ReclaimInterval: time.Duration(c.ReclaimInterval), Retention: time.Duration(c.Retention),
		Replica: c.Replica, LeaseTTL: time.Duration(c.LeaseTTL),
		StartTimeout:     time.Duration(c.StartTimeout),
		DecisionLogBytes: c.DecisionLog.MaxBytes, DecisionLogKeep: c.DecisionLog.Keep, DecisionInputs: c.DecisionLog.IncludeInputs,
		DecisionRetention: time.Duration(c.DecisionLog.Retention),
		PolicyLimits: gateway.PolicyLimits{
			EvaluateTimeout: time.Duration(c.Policy.Evaluate.Timeout), EvaluateMaxBytes: c.Policy.Evaluate.MaxBytes,
			EvaluateConcurrency: c.Policy.Evaluate.Concurrency,
			ReplayTimeout:       time.Duration(c.Policy.Replay.Timeout), ReplayMaxBytes: c.Policy.Replay.MaxBytes,
			ReplayConcurrency: c.Policy.Replay.Concurrency, ReplayMemoryBytes: c.Policy.Replay.MemoryBytes,
			ReplayCPU: time.Duration(c.Policy.Replay.CPUTime),
		},
		HTTP: httpDeadlines{
			ReadHeader: time.Duration(c.HTTP.ReadHeaderTimeout), Read: time.Duration(c.HTTP.ReadTimeout),
			Write: time.Duration(c.HTTP.WriteTimeout), Idle: time.Duration(c.HTTP.IdleTimeout),
		},
		TrustedProxies: proxies,
		Store:          storeCfg,
	}
	if err := o.PolicyLimits.Check(); err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	for _, n := range c.Nodes {
		if n.Name == "" {
			return o, errors.New(path + ": nodes[].name is required")
		}
		enr := "sandbox"
		if n.Egress {
			enr = "sandbox+egress"
		}
		o.Nodes = append(o.Nodes, store.Node{Name: n.Name, Enrollment: enr, State: "active",
			MaxSandboxes: n.MaxSandboxes, CPUMHz: n.CPUMHz, MemoryMB: n.MemoryMB})
	}
	return o, nil
}

// envStoreDSN, when set, is the postgres driver's DSN, so that no
// password needs to sit in the configuration file.
const envStoreDSN = "SANDGATE_STORE_DSN"

// storeConfig is the store section as assemble takes it: the DSN from
// SANDGATE_STORE_DSN, else dsn_file, else dsn.
func (c serveConfig) storeConfig() (assemble.StoreConfig, []string) {
	sc := assemble.DefaultConfig().Store
	if c.Store.Driver != "" {
		sc.Driver = c.Store.Driver
	}
	var problems []string
	dsn := c.Store.DSN
	if c.Store.DSNFile != "" {
		if c.Store.DSN != "" {
			problems = append(problems, "store.dsn and store.dsn_file: give one")
		}
		b, err := os.ReadFile(c.Store.DSNFile)
		if err != nil {
			problems = append(problems, fmt.Sprintf("store.dsn_file: %v", err))
		}
		dsn = strings.TrimSpace(string(b))
	}
	if env := os.Getenv(envStoreDSN); env != "" {
		dsn = env
	}
	if sc.Driver == assemble.DriverPostgres && dsn == "" {
		problems = append(problems, "store.driver postgres needs a DSN: set "+envStoreDSN+", store.dsn_file or store.dsn")
	}
	if sc.Driver != assemble.DriverPostgres && (c.Store.DSN != "" || c.Store.DSNFile != "") {
		problems = append(problems, fmt.Sprintf("store.dsn is for store.driver postgres, not %q", sc.Driver))
	}
	if sc.Driver == assemble.DriverPostgres {
		sc.DSN = dsn
	}
	if c.Store.StatementTimeout < 0 || c.Store.ConnectTimeout < 0 || c.Store.MaxConns < 0 || c.Store.LogConns < 0 {
		problems = append(problems, "store.max_conns, store.log_conns, store.statement_timeout and store.connect_timeout must be positive (or absent for their defaults)")
	}
	sc.Postgres.MaxConns = c.Store.MaxConns
	sc.Postgres.LogConns = c.Store.LogConns
	sc.Postgres.StatementTimeout = time.Duration(c.Store.StatementTimeout)
	sc.Postgres.ConnectTimeout = time.Duration(c.Store.ConnectTimeout)
	return sc, problems
}

// countSet counts the true values.
func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

func newServeCmd() *cobra.Command {
	var configFile, listen, replica string
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--listen ADDR] [--replica NAME]",
		Short: "Run the gateway in production from a JSON configuration file",
		Long: `Run the gateway from a JSON configuration file (see docs/runbook.md for every
field). Mint the first operator token with 'sandgate token mint --offline --data DIR'
before the first start: the bbolt store is locked while the gateway runs.

--listen and --replica take the place of the file's listen and replica: the
replicas of one deployment share one file and differ in these (a scheduler
gives each its port and name, as deploy/nomad/sandgate.nomad.hcl does).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile == "" {
				return errors.New("--config is required")
			}
			o, err := loadServeConfig(configFile, serveOverrides{Listen: listen, Replica: replica})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runGateway(ctx, o, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "configuration file (JSON)")
	cmd.Flags().StringVar(&listen, "listen", "", "address of the API, in place of the file's listen")
	cmd.Flags().StringVar(&replica, "replica", "", "this replica's name, in place of the file's replica")
	return cmd
}
