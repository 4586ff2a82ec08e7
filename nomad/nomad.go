// Package nomad is sandgate's narrow client over HashiCorp's nomad/api: the
// few Nomad calls the gateway makes (agent self, nodes, job register, read,
// list and purge, evaluations and allocations, exec and logs), each taking
// ctx first, bounded by a per-call timeout and returning small typed values.
//
// The client is built from an explicit Config; it never calls
// api.DefaultConfig and reads no NOMAD_* variable. It only touches the
// gateway's own jobs: a job ID (or name) without Config.JobPrefix is refused
// with ErrForbiddenJob before any request is sent (rule H9).
//
// Errors are the caller's context error (wrapped) when ctx is done, or an
// *Error carrying the operation, the HTTP status or exec close code, Nomad's
// message and a sentinel to branch on: ErrNotFound, ErrUnavailable,
// ErrForbiddenJob or ErrExecDropped. The Nomad token never appears in an
// error.
package nomad

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// The Op names of the Client methods, as passed to Config.Observe and set in
// Error.Op.
const (
	OpPing           = "ping"
	OpNodes          = "nodes"
	OpNode           = "node"
	OpNodeUsage      = "node_usage"
	OpRegister       = "register"
	OpJob            = "job"
	OpListJobs       = "list_jobs"
	OpPurge          = "purge"
	OpWaitPlacement  = "wait_placement"
	OpAllocation     = "allocation"
	OpJobAllocations = "job_allocations"
	OpExec           = "exec"
	OpLogs           = "logs"
	OpServers        = "servers"
)

// Ops returns the name of every operation the Client reports to
// Config.Observe (the gateway gives each its metric series at start).
func Ops() []string {
	return []string{OpPing, OpNodes, OpNode, OpNodeUsage, OpRegister, OpJob, OpListJobs, OpPurge,
		OpWaitPlacement, OpAllocation, OpJobAllocations, OpExec, OpLogs, OpServers, OpTaskDirUsage, OpNodeAllocated}
}

// Client talks to one Nomad cluster on behalf of the gateway. It is safe for
// concurrent use.
type Client struct {
	cfg    Config
	api    *api.Client
	base   *url.URL
	dialer *websocket.Dialer
}

// New validates cfg (after filling zero Timeout and PollInterval with the
// defaults) and builds a Client. It reads the TLS files but makes no request:
// call Ping to check that Nomad answers. Errors wrap ErrInvalidConfig.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base, err := url.Parse(cfg.Address)
	if err != nil {
		return nil, configErr("Address %q is not a URL", cfg.Address)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		if hc, err = newHTTPClient(cfg.TLS); err != nil {
			return nil, err
		}
	}
	// api.NewClient consults api.DefaultConfig (and so NOMAD_*) only for an
	// empty Address, which validate rules out; with HttpClient set it ignores
	// TLSConfig. Everything it uses comes from here.
	ac, err := api.NewClient(&api.Config{
		Address:    cfg.Address,
		Region:     cfg.Region,
		Namespace:  cfg.Namespace,
		SecretID:   cfg.Token,
		HttpClient: hc,
	})
	if err != nil {
		return nil, configErr("%s", err.Error())
	}
	return &Client{cfg: cfg, api: ac, base: base, dialer: newDialer(hc, cfg.Timeout)}, nil
}

// newHTTPClient builds the default HTTP/1.1 client (exec WebSockets need
// HTTP/1.1) with the TLS files applied and no proxy.
func newHTTPClient(t TLSConfig) (*http.Client, error) {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	hc := &http.Client{Transport: tr}
	if t.isZero() {
		return hc, nil
	}
	err := api.ConfigureTLS(hc, &api.TLSConfig{
		CACert:        t.CACert,
		ClientCert:    t.ClientCert,
		ClientKey:     t.ClientKey,
		TLSServerName: t.ServerName,
		Insecure:      t.Insecure,
	})
	if err != nil {
		return nil, configErr("TLS: %s", err.Error())
	}
	return hc, nil
}

// newDialer builds the exec WebSocket dialer from the HTTP client's transport.
func newDialer(hc *http.Client, handshake time.Duration) *websocket.Dialer {
	d := &websocket.Dialer{HandshakeTimeout: handshake, ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10}
	if tr, ok := hc.Transport.(*http.Transport); ok {
		d.NetDialContext = tr.DialContext
		d.Proxy = tr.Proxy
		if tr.TLSClientConfig != nil {
			d.TLSClientConfig = tr.TLSClientConfig.Clone()
		}
	}
	return d
}

// query returns QueryOptions bound to ctx. Region, namespace and token come
// from the api.Config.
func query(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{}).WithContext(ctx)
}

// write returns WriteOptions bound to ctx.
func write(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

// run calls fn under the per-call Timeout and classifies its error.
func run[T any](ctx context.Context, c *Client, op string, fn func(context.Context) (T, error)) (T, error) {
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	v, err := fn(callCtx)
	if err != nil {
		var zero T
		return zero, c.classify(ctx, callCtx, op, err)
	}
	return v, nil
}

// call is run plus the Observe hook: the shape of every non-streaming method.
func call[T any](ctx context.Context, c *Client, op string, fn func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	v, err := run(ctx, c, op, fn)
	c.observe(op, start, err)
	return v, err
}

// observe reports a finished call to Config.Observe.
func (c *Client) observe(op string, start time.Time, err error) {
	if c.cfg.Observe != nil {
		c.cfg.Observe(op, time.Since(start), err)
	}
}
