package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// seen is what the fake gateway received.
type seen struct {
	method, rawPath, query, auth, contentType, userAgent, body string
}

// fakeGateway answers every request with status, content type and body,
// and records the last request.
func fakeGateway(t *testing.T, status int, ctype, body string) (*Client, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"),
			r.Header.Get("Content-Type"), r.Header.Get("User-Agent"), string(b)}
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "5")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Addr: srv.URL + "/", Token: "tok.en-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

const sandboxJSON = `{"id":"k7x2","state":"running","node":"worker-1","profile":"strict","network":"none",
 "image":"ubuntu:24.04","cpu_mhz":500,"memory_mb":512,"principal":"agent-a","created_at":"2026-11-29T10:00:00Z",
 "expires_at":"2026-11-29T11:00:00Z","ceiling_at":"2026-11-29T14:00:00Z","labels":{"task":"demo"}`

const hostJSON = `{"name":"worker-1","id":"5e2c","datacenter":"dc1","enrollment":"sandbox","state":"active",
 "nomad":{"status":"ready","eligibility":"eligible","drain":false},"os":"linux","architecture":"arm64",
 "usage":{"memory_percent":41.2,"disk_percent":63},"budget":{"limits":{"max_sandboxes":10,"cpu_mhz":8000,"memory_mb":16384},
 "used":{"sandboxes":1,"cpu_mhz":500,"memory_mb":512}},"live_sandboxes":1,"updated_at":"2026-11-29T10:00:00Z"}`

//nolint:gosec // G101: a token record of the docs, no secret
const tokenJSON = `{"id":"0f3a","role":"agent","subject":"agent-ci","label":"ci runner","created_at":"2026-11-29T10:00:00Z",
 "expires_at":"2026-11-30T10:00:00Z","last_used":"","revoked_at":"","quota":{"max_live_sandboxes":3}`

func ptr[T any](v T) *T { return &v }

// Every method sends the documented method, path, query and body, and
// decodes the documented answer.
func TestEveryMethodSpeaksTheDocumentedShape(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, answer, wantMethod, wantPath, wantQuery, wantBody string
		status                                                  int
		call                                                    func(context.Context, *Client) (any, error)
		check                                                   func(any) bool
	}{
		{name: "capabilities are read", status: 200, answer: `{"capabilities":["sandboxes.v1"],"version":"dev","bundle_revision":"r1","simulated":true}`,
			wantMethod: "GET", wantPath: "/v1/capabilities",
			call: func(ctx context.Context, c *Client) (any, error) { return c.Capabilities(ctx) },
			check: func(v any) bool {
				cp := v.(Capabilities)
				return cp.Has("sandboxes.v1") && !cp.Has("x") && cp.Simulated && cp.BundleRevision == "r1"
			}},
		{name: "a create sends only the fields that are set and returns the session token", status: 201, answer: sandboxJSON + `,"token":"eyJ.s"}`,
			wantMethod: "POST", wantPath: "/v1/sandboxes", wantBody: `{"profile":"workspace","ttl_seconds":600,"labels":{"a":"b"},"wait_seconds":0}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSandbox(ctx, CreateRequest{Profile: ptr("workspace"), TTLSeconds: ptr(int64(600)), Labels: map[string]string{"a": "b"}, WaitSeconds: ptr(int64(0))})
			},
			check: func(v any) bool {
				s := v.(Sandbox)
				return s.Token == "eyJ.s" && s.CPUMHz == 500 && s.Labels["task"] == "demo"
			}},
		{name: "a list of live sandboxes asks for big pages", status: 200, answer: `{"sandboxes":[` + sandboxJSON + `}]}`,
			wantMethod: "GET", wantPath: "/v1/sandboxes", wantQuery: "limit=1000",
			call:  func(ctx context.Context, c *Client) (any, error) { return c.ListSandboxes(ctx, false) },
			check: func(v any) bool { l := v.([]Sandbox); return len(l) == 1 && l[0].ID == "k7x2" }},
		{name: "a list of every sandbox asks for all", status: 200, answer: `{"sandboxes":[]}`,
			wantMethod: "GET", wantPath: "/v1/sandboxes", wantQuery: "all=true&limit=1000",
			call:  func(ctx context.Context, c *Client) (any, error) { return c.ListSandboxes(ctx, true) },
			check: func(v any) bool { return len(v.([]Sandbox)) == 0 }},
		{name: "a get escapes the id", status: 200, answer: sandboxJSON + `}`,
			wantMethod: "GET", wantPath: "/v1/sandboxes/a%2Fb%20c%3F",
			call:  func(ctx context.Context, c *Client) (any, error) { return c.GetSandbox(ctx, "a/b c?") },
			check: func(v any) bool { return v.(Sandbox).State == StateRunning }},
		{name: "a destroy answers nothing", status: 204,
			wantMethod: "DELETE", wantPath: "/v1/sandboxes/k7x2",
			call:  func(ctx context.Context, c *Client) (any, error) { return nil, c.DestroySandbox(ctx, "k7x2") },
			check: func(any) bool { return true }},
		{name: "an exec sends the argv and reads the exit code", status: 200,
			answer:     `{"exit_code":3,"stdout":"hi\n","stderr":"","stdout_bytes":3,"stderr_bytes":0,"stdout_truncated":false,"stderr_truncated":false,"truncated":false,"timed_out":false,"duration_ms":7}`,
			wantMethod: "POST", wantPath: "/v1/sandboxes/k7x2/exec", wantBody: `{"argv":["sh","-c","exit 3"],"stdin":"","timeout_seconds":5,"env":{"A":"1"}}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Exec(ctx, "k7x2", ExecRequest{Argv: []string{"sh", "-c", "exit 3"}, Stdin: ptr(""), TimeoutSeconds: new(int64(5)), Env: map[string]string{"A": "1"}})
			},
			check: func(v any) bool {
				r := v.(ExecResult)
				return r.ExitCode != nil && *r.ExitCode == 3 && r.Stdout == "hi\n"
			}},
		{name: "an exec that outlived its stream has no exit code", status: 200, answer: `{"exit_code":null,"timed_out":true}`,
			wantMethod: "POST", wantPath: "/v1/sandboxes/k7x2/exec", wantBody: `{"argv":["sleep","999"]}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Exec(ctx, "k7x2", ExecRequest{Argv: []string{"sleep", "999"}})
			},
			check: func(v any) bool { r := v.(ExecResult); return r.ExitCode == nil && r.TimedOut }},
		{name: "logs are raw bytes with the stream and the tail", status: 200, answer: "task started\n\x00bin",
			wantMethod: "GET", wantPath: "/v1/sandboxes/k7x2/logs", wantQuery: "stream=stderr&tail_bytes=100",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Logs(ctx, "k7x2", LogsOptions{Stream: "stderr", TailBytes: 100})
			},
			check: func(v any) bool { return string(v.([]byte)) == "task started\n\x00bin" }},
		{name: "an extend sends whole seconds, rounded up, and reads clamped", status: 200, answer: sandboxJSON + `,"clamped":true}`,
			wantMethod: "POST", wantPath: "/v1/sandboxes/k7x2/extend", wantBody: `{"ttl_seconds":91}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Extend(ctx, "k7x2", 90*time.Second+time.Millisecond)
			},
			check: func(v any) bool { s := v.(Sandbox); return s.Clamped != nil && *s.Clamped }},
		{name: "hosts are listed with usage and budget", status: 200, answer: `{"hosts":[` + hostJSON + `]}`,
			wantMethod: "GET", wantPath: "/v1/hosts",
			call: func(ctx context.Context, c *Client) (any, error) { return c.ListHosts(ctx) },
			check: func(v any) bool {
				h := v.([]Host)
				return len(h) == 1 && h[0].Usage != nil && h[0].Usage.MemoryPercent == 41.2 && h[0].Budget.Limits.MaxSandboxes == 10 && h[0].Nomad.Status == "ready"
			}},
		{name: "an enrollment sends egress and only the budget figures given", status: 200, answer: hostJSON,
			wantMethod: "PUT", wantPath: "/v1/hosts/worker%201/enrollment", wantBody: `{"egress":true,"budget":{"max_sandboxes":4}}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Enroll(ctx, "worker 1", EnrollRequest{Egress: ptr(true), Budget: &BudgetRequest{MaxSandboxes: ptr(int64(4))}})
			},
			check: func(v any) bool { return v.(Host).Enrollment == "sandbox" }},
		{name: "an unenrollment asks to reclaim and lists what was", status: 200, answer: `{"host":` + hostJSON + `,"reclaimed":["k7x2"]}`,
			wantMethod: "DELETE", wantPath: "/v1/hosts/worker-1/enrollment", wantQuery: "reclaim=true",
			call:  func(ctx context.Context, c *Client) (any, error) { return c.Unenroll(ctx, "worker-1", true) },
			check: func(v any) bool { h := v.(HostChange); return len(h.Reclaimed) == 1 && h.Host.Name == "worker-1" }},
		{name: "a state change sends the state", status: 200, answer: `{"host":` + hostJSON + `,"reclaimed":[]}`,
			wantMethod: "POST", wantPath: "/v1/hosts/worker-1/state", wantBody: `{"state":"draining"}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.SetHostState(ctx, "worker-1", HostDraining)
			},
			check: func(v any) bool { return v.(HostChange).Host.Name == "worker-1" }},
		{name: "a mint sends the role, ttl and quota and returns the secret", status: 201, answer: tokenJSON + `,"token":"eyJ.a"}`,
			wantMethod: "POST", wantPath: "/v1/tokens", wantBody: `{"role":"agent","ttl_seconds":3600,"subject":"agent-ci","quota":{"max_live_sandboxes":3}}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.MintToken(ctx, MintRequest{Role: ptr(RoleAgent), TTLSeconds: ptr(int64(3600)), Subject: ptr("agent-ci"), Quota: &MintQuota{MaxLiveSandboxes: ptr(int64(3))}})
			},
			check: func(v any) bool { tk := v.(Token); return tk.Token == "eyJ.a" && tk.Quota.MaxLiveSandboxes == 3 }},
		{name: "tokens are listed", status: 200, answer: `{"tokens":[` + tokenJSON + `}]}`,
			wantMethod: "GET", wantPath: "/v1/tokens",
			call: func(ctx context.Context, c *Client) (any, error) { return c.ListTokens(ctx) },
			check: func(v any) bool {
				l := v.([]Token)
				return len(l) == 1 && l[0].Token == "" && l[0].Subject == "agent-ci"
			}},
		{name: "a revoke escapes the id", status: 204,
			wantMethod: "DELETE", wantPath: "/v1/tokens/0f%2F3a",
			call:  func(ctx context.Context, c *Client) (any, error) { return nil, c.RevokeToken(ctx, "0f/3a") },
			check: func(any) bool { return true }},
		{name: "a file delete escapes the path and asks for recursive", status: 204,
			wantMethod: "DELETE", wantPath: "/v1/sandboxes/k7x2/files", wantQuery: "path=%2Fworkspace%2Fa+b%26c&recursive=true",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.DeleteFile(ctx, "k7x2", "/workspace/a b&c", true)
			},
			check: func(any) bool { return true }},
		{name: "a listing is decoded with its entries", status: 200,
			answer:     `{"path":"/tmp","entries":[{"name":"a","type":"file","size":3,"mode":"0644","modified_at":"2026-12-02T10:00:00Z"}],"truncated":true,"total":1001}`,
			wantMethod: "GET", wantPath: "/v1/sandboxes/k7x2/files", wantQuery: "path=%2Ftmp",
			call: func(ctx context.Context, c *Client) (any, error) { return c.ListFiles(ctx, "k7x2", "/tmp") },
			check: func(v any) bool {
				l := v.(Listing)
				return l.Truncated && l.Total == 1001 && len(l.Entries) == 1 && l.Entries[0].Name == "a" && l.Entries[0].Size == 3
			}},
		{name: "decisions are read with a limit", status: 200,
			answer:     `{"decisions":[{"time":"2026-11-29T10:00:00.123Z","decision_id":"5f0c","entrypoint":"authz","allow":false,"rule_ids":["T2"],"violations":[{"rule":"T2","msg":"m"}],"duration_us":210}]}`,
			wantMethod: "GET", wantPath: "/v1/decisions", wantQuery: "limit=5",
			call: func(ctx context.Context, c *Client) (any, error) { return c.Decisions(ctx, 5) },
			check: func(v any) bool {
				d := v.([]Decision)
				return len(d) == 1 && !d[0].Allow && d[0].RuleIDs[0] == "T2" && d[0].Violations[0].Msg == "m" && d[0].DurationUS == 210
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, got := fakeGateway(t, tc.status, "application/json", tc.answer)
			v, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if got.method != tc.wantMethod || got.rawPath != tc.wantPath || got.query != tc.wantQuery {
				t.Fatalf("sent %s %s ?%s, want %s %s ?%s", got.method, got.rawPath, got.query, tc.wantMethod, tc.wantPath, tc.wantQuery)
			}
			if got.body != tc.wantBody {
				t.Fatalf("body %s, want %s", got.body, tc.wantBody)
			}
			if tc.wantBody != "" && got.contentType != "application/json" {
				t.Fatalf("content type %q", got.contentType)
			}
			if got.auth != "Bearer tok.en-1" || got.userAgent != "sandgate-client" {
				t.Fatalf("headers: auth %q, user agent %q", got.auth, got.userAgent)
			}
			if !tc.check(v) {
				t.Fatalf("decoded %+v", v)
			}
		})
	}
}

func TestAClientWithoutATokenSendsNoAuthorization(t *testing.T) {
	t.Parallel()
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Values("Authorization")
		_, _ = io.WriteString(w, `{"capabilities":[]}`)
	}))
	defer srv.Close()
	c, err := New(Config{Addr: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Capabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(auth) != 0 {
		t.Fatalf("Authorization sent without a token: %q", auth)
	}
}

// A base URL with a path (a gateway behind a reverse proxy) prefixes
// every request.
func TestABasePathPrefixesEveryRequest(t *testing.T) {
	t.Parallel()
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.EscapedPath()
		_, _ = io.WriteString(w, sandboxJSON+`}`)
	}))
	defer srv.Close()
	c, err := New(Config{Addr: srv.URL + "/sand%20gate/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSandbox(t.Context(), "x y"); err != nil {
		t.Fatal(err)
	}
	if path != "/sand%20gate/v1/sandboxes/x%20y" {
		t.Fatalf("path %q", path)
	}
}

func TestAnEmptyOrDotIDIsRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	c, got := fakeGateway(t, 200, "application/json", `{}`)
	calls := map[string]func() error{
		"get of an empty id":      func() error { _, err := c.GetSandbox(t.Context(), ""); return err },
		"destroy of ..":           func() error { return c.DestroySandbox(t.Context(), "..") },
		"exec in .":               func() error { _, err := c.Exec(t.Context(), ".", ExecRequest{}); return err },
		"logs of an empty id":     func() error { _, err := c.Logs(t.Context(), "", LogsOptions{}); return err },
		"extend by half a second": func() error { _, err := c.Extend(t.Context(), "k", 500*time.Millisecond); return err },
		"enroll of an empty node": func() error { _, err := c.Enroll(t.Context(), "", EnrollRequest{}); return err },
		"unenroll of ..":          func() error { _, err := c.Unenroll(t.Context(), "..", false); return err },
		"state of an empty node":  func() error { _, err := c.SetHostState(t.Context(), "", "active"); return err },
		"revoke of an empty id":   func() error { return c.RevokeToken(t.Context(), "") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", name, err)
		}
	}
	if got.method != "" {
		t.Fatalf("a request was sent: %+v", got)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"the default config is valid", DefaultConfig(), true},
		{"an https address with a path is valid", Config{Addr: "https://gw.example/sandgate/", Token: "a.b-c_d"}, true},
		{"no address is refused", Config{}, false},
		{"an address without a scheme is refused", Config{Addr: "127.0.0.1:8080"}, false},
		{"a unix address is refused", Config{Addr: "unix:///run/sandgate.sock"}, false},
		{"an address without a host is refused", Config{Addr: "http://"}, false},
		{"an address with a query is refused", Config{Addr: "http://h/?x=1"}, false},
		{"an address with user info is refused", Config{Addr: "http://u:p@h/"}, false},                //nolint:gosec // G101: a made-up URL that must be refused
		{"a token with a newline is refused", Config{Addr: "http://h", Token: "a\nX-Evil: 1"}, false}, //nolint:gosec // G101: a made-up token that must be refused
		{"a token with a space is refused", Config{Addr: "http://h", Token: "Bearer abc"}, false},
		{"a user agent with a newline is refused", Config{Addr: "http://h", UserAgent: "a\r\nb"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.cfg)
			if tc.ok != (err == nil) {
				t.Fatalf("err %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v does not wrap ErrInvalidConfig", err)
			}
			if err != nil && tc.cfg.Token != "" && strings.Contains(err.Error(), tc.cfg.Token) {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}

func TestTheTokenIsNeverPrinted(t *testing.T) {
	t.Parallel()
	cfg := Config{Addr: "http://127.0.0.1:1", Token: "s3cr3t-token"}
	for _, s := range []string{cfg.String(), cfg.GoString()} {
		if strings.Contains(s, "s3cr3t") || !strings.Contains(s, "[redacted]") {
			t.Fatalf("config prints as %q", s)
		}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSandboxes(t.Context(), false)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("err %v", err)
	}
}

// A refused connection names the address, is not a *Problem, and a
// cancelled context is errors.Is context.Canceled.
func TestTransportFailuresNameTheAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c, err := New(Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSandbox(t.Context(), "k7x2")
	var p *Problem
	var te *TransportError
	if err == nil || errors.As(err, &p) || !errors.As(err, &te) || te.URL != addr+"/v1/sandboxes/k7x2" ||
		!strings.Contains(err.Error(), addr+"/v1/sandboxes/k7x2") {
		t.Fatalf("err %v", err)
	}
}

func TestCancellingTheContextAbortsTheCall(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		select { // hold the answer until the client leaves or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(Config{Addr: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-arrived; cancel() }()
	_, err = c.Exec(ctx, "k7x2", ExecRequest{Argv: []string{"sleep", "60"}})
	var te *TransportError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
		t.Fatalf("err %v, want a TransportError wrapping context.Canceled", err)
	}
}

func TestASuccessThatIsNotJSONIsAnError(t *testing.T) {
	t.Parallel()
	c, _ := fakeGateway(t, 200, "text/html", "<html>login</html>")
	if _, err := c.ListSandboxes(t.Context(), false); err == nil || !strings.Contains(err.Error(), "not the expected JSON") {
		t.Fatalf("err %v", err)
	}
}

// The request body is the JSON the gateway decodes strictly: no unknown
// members, whatever the caller left zero.
func TestZeroCreateSendsAnEmptyObject(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(CreateRequest{})
	if err != nil || string(b) != "{}" {
		t.Fatalf("%s %v", b, err)
	}
}

// A file write sends its bytes as they are, with their size and the mode
// in octal, and no JSON.
func TestAFileWriteSendsRawBytesWithItsSizeAndMode(t *testing.T) {
	t.Parallel()
	c, got := fakeGateway(t, 200, "application/json", `{"path":"/workspace/x","type":"file","size":4,"mode":"0750","modified_at":"2026-12-02T10:00:00Z"}`)
	mode := fs.FileMode(0o750)
	info, err := c.WriteFile(t.Context(), "k7x2", "/workspace/x", strings.NewReader("\x00\xffab"), 4, WriteOptions{Mode: &mode})
	if err != nil {
		t.Fatal(err)
	}
	if got.method != "PUT" || got.rawPath != "/v1/sandboxes/k7x2/files" || got.query != "mode=0750&path=%2Fworkspace%2Fx" ||
		got.body != "\x00\xffab" || got.contentType != "application/octet-stream" {
		t.Fatalf("sent %+v", got)
	}
	if info.Mode != "0750" || info.Size != 4 || info.Limits != (FileLimits{}) {
		t.Fatalf("decoded %+v", info)
	}
}
