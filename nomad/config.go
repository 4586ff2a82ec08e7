package nomad

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults applied by DefaultConfig and by New to zero-valued fields.
const (
	// DefaultTimeout bounds each non-streaming call (and the exec handshake).
	DefaultTimeout = 10 * time.Second
	// DefaultPollInterval is the pause between two polls of WaitPlacement.
	DefaultPollInterval = 100 * time.Millisecond
)

// Config configures a Client. Build it explicitly (in cmd/, from flags or
// the environment): nothing in this package reads NOMAD_* variables.
type Config struct {
	// Address is the Nomad HTTP API, "http://host:4646" or "https://host:4646".
	// Required. It carries no path, query or user info: authenticate with Token.
	Address string
	// Token is the ACL token's secret ID, sent as the X-Nomad-Token header.
	// Empty on clusters without ACLs. It never appears in an error or in String.
	Token string
	// Region is the region every request targets; empty means the agent's own.
	Region string
	// Namespace is the namespace every request targets; empty means "default".
	// Register refuses a job whose Namespace names another one.
	Namespace string
	// TLS holds the client-side TLS files for an https Address. It must be
	// empty when HTTPClient is set (that client carries its own TLS settings).
	TLS TLSConfig
	// JobPrefix is the job-ID prefix that marks the gateway's own jobs, for
	// example "sandgate-sbx-". Required. Every job the client registers, reads,
	// lists or purges must carry it (rule H9); others get ErrForbiddenJob.
	JobPrefix string
	// Timeout bounds each non-streaming call, including every poll request of
	// WaitPlacement and the WebSocket handshake of Exec. Zero means
	// DefaultTimeout. The caller's ctx still applies on top.
	Timeout time.Duration
	// PollInterval is the pause between two polls of WaitPlacement. Zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// HTTPClient, when set, is used for every request instead of the client
	// New builds. Its Transport should be an *http.Transport: Exec dials its
	// WebSocket with that transport's DialContext, Proxy and TLSClientConfig
	// (with any other RoundTripper, Exec dials plainly). The client New builds
	// uses no proxy: supply an HTTPClient if Nomad sits behind one.
	HTTPClient *http.Client
	// Observe, when set, is called once after every Client method returns,
	// with the method's Op name (OpPing, OpRegister, ...), its duration and its
	// error (nil on success). It must be safe for concurrent use and fast.
	Observe func(op string, d time.Duration, err error)
}

// TLSConfig names the TLS files for an https Nomad address. Paths are read
// once, by New.
type TLSConfig struct {
	// CACert is a PEM file of the CA that signed Nomad's certificate; empty
	// means the system roots.
	CACert string
	// ClientCert is a PEM client certificate for mutual TLS; set with ClientKey.
	ClientCert string
	// ClientKey is the PEM private key of ClientCert.
	ClientKey string
	// ServerName overrides the name checked in Nomad's certificate, e.g.
	// "server.global.nomad".
	ServerName string
	// Insecure skips verification of Nomad's certificate. Never in production.
	Insecure bool
}

func (t TLSConfig) isZero() bool { return t == TLSConfig{} }

// DefaultConfig returns a Config with the default Timeout and PollInterval.
// Address and JobPrefix are left empty: they are required and have no safe
// default. It reads no environment.
func DefaultConfig() Config {
	return Config{Timeout: DefaultTimeout, PollInterval: DefaultPollInterval}
}

// String describes the Config for logs without its Token.
func (c Config) String() string {
	token := "none"
	if c.Token != "" {
		token = "redacted"
	}
	return fmt.Sprintf("nomad.Config{Address: %q, Region: %q, Namespace: %q, JobPrefix: %q, Token: %s, TLS: %t, Timeout: %s, PollInterval: %s}",
		c.Address, c.Region, c.Namespace, c.JobPrefix, token, !c.TLS.isZero(), c.Timeout, c.PollInterval)
}

// GoString is String, so that %#v does not print the Token either.
func (c Config) GoString() string { return c.String() }

// withDefaults fills the zero-valued durations.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	return c
}

// validate reports the first problem of the Config as an error wrapping
// ErrInvalidConfig. Messages never include the Token.
func (c Config) validate() error {
	if c.Address == "" {
		return configErr("Address is required")
	}
	u, err := url.Parse(c.Address)
	if err != nil {
		return configErr("Address %q is not a URL", c.Address)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return configErr("Address %q: scheme must be http or https", c.Address)
	}
	if u.Host == "" {
		return configErr("Address %q has no host", c.Address)
	}
	if u.User != nil {
		return configErr("Address must not carry user info; use Token")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return configErr("Address %q must not carry a path, query or fragment", c.Address)
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return configErr("Token contains white space")
	}
	if err := validatePrefix(c.JobPrefix); err != nil {
		return err
	}
	if c.Timeout < 0 {
		return configErr("Timeout must not be negative")
	}
	if c.PollInterval < 0 {
		return configErr("PollInterval must not be negative")
	}
	if !c.TLS.isZero() {
		if c.HTTPClient != nil {
			return configErr("TLS and HTTPClient are mutually exclusive: configure TLS on the HTTPClient")
		}
		if u.Scheme != "https" {
			return configErr("TLS is set but Address %q is not https", c.Address)
		}
		if (c.TLS.ClientCert == "") != (c.TLS.ClientKey == "") {
			return configErr("TLS.ClientCert and TLS.ClientKey go together")
		}
	}
	return nil
}

// validatePrefix requires a JobPrefix that is specific enough to mean
// something: letters, digits, '-', '_' and '.', at least two characters.
func validatePrefix(p string) error {
	if p == "" {
		return configErr("JobPrefix is required")
	}
	if len(p) < 2 || len(p) > 64 {
		return configErr("JobPrefix %q must be 2 to 64 characters", p)
	}
	for _, r := range p {
		if !isIDRune(r) {
			return configErr("JobPrefix %q: only letters, digits, '-', '_' and '.' are allowed", p)
		}
	}
	return nil
}

// isIDRune reports whether r may appear in a prefix or an opaque Nomad ID
// (allocation, evaluation and node IDs are UUIDs).
func isIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}

// validID reports whether s can be an allocation, evaluation or node ID. The
// api package puts these IDs into URL paths unescaped, so anything else is
// refused before a request is built.
func validID(s string) bool {
	if s == "" || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !isIDRune(r) {
			return false
		}
	}
	return true
}
