package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestNewValidatesTheConfig(t *testing.T) {
	t.Parallel()
	good := func() Config {
		c := DefaultConfig()
		c.Address = "http://127.0.0.1:4646"
		c.JobPrefix = "sandgate-sbx-"
		return c
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; empty means valid
	}{
		{"a minimal config is valid", func(*Config) {}, ""},
		{"zero durations take the defaults", func(c *Config) { c.Timeout, c.PollInterval = 0, 0 }, ""},
		{"the address is required", func(c *Config) { c.Address = "" }, "Address is required"},
		{"the address must be http or https", func(c *Config) { c.Address = "unix:///var/run/nomad.sock" }, "scheme"},
		{"the address carries no path", func(c *Config) { c.Address = "http://h:4646/v1" }, "path"},
		{"the address carries no user info", func(c *Config) { c.Address = "http://u:p@h:4646" }, "user info"},
		{"the job prefix is required", func(c *Config) { c.JobPrefix = "" }, "JobPrefix is required"},
		{"a one-letter prefix is refused", func(c *Config) { c.JobPrefix = "s" }, "2 to 64"},
		{"a prefix with a slash is refused", func(c *Config) { c.JobPrefix = "a/b" }, "only letters"},
		{"a negative timeout is refused", func(c *Config) { c.Timeout = -time.Second }, "Timeout"},
		{"TLS needs https", func(c *Config) { c.TLS.CACert = "/ca.pem" }, "not https"},
		{"TLS and HTTPClient exclude each other", func(c *Config) {
			c.Address, c.TLS.Insecure, c.HTTPClient = "https://h:4646", true, http.DefaultClient
		}, "mutually exclusive"},
		{"a client cert needs its key", func(c *Config) {
			c.Address, c.TLS.ClientCert = "https://h:4646", "/c.pem"
		}, "go together"},
		{"a missing CA file is reported", func(c *Config) {
			c.Address, c.TLS.CACert = "https://h:4646", "/nonexistent/ca.pem"
		}, "TLS"},
		{"a token with a newline is refused without being echoed", func(c *Config) { c.Token = "abc\ndef" }, "white space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := good()
			tt.change(&cfg)
			_, err := New(cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
			if cfg.Token != "" && strings.Contains(err.Error(), cfg.Token) {
				t.Fatalf("the error carries the token: %v", err)
			}
		})
	}
}

func TestConfigStringHidesTheToken(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Token = testToken
	for _, s := range []string{cfg.String(), fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%v", &cfg)} {
		if strings.Contains(s, testToken) {
			t.Fatalf("Config printed its token: %s", s)
		}
	}
}

func TestPingParsesAgentSelf(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("agent-self")
	a, err := r.client().Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Agent{Name: "<hostname>.global", Version: "1.6.5+execfix", Region: "global", Datacenter: "dc1", Server: true}
	if a != want {
		t.Fatalf("Ping = %+v, want %+v", a, want)
	}
	if got := r.requests()[0].Token; got != testToken {
		t.Fatalf("X-Nomad-Token = %q, want the configured token", got)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		wantIs     error
		wantStatus int
	}{
		{"404 is ErrNotFound", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "job not found", http.StatusNotFound)
		}, ErrNotFound, 404},
		{"429 is ErrUnavailable", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "rate limited", http.StatusTooManyRequests)
		}, ErrUnavailable, 429},
		{"503 is ErrUnavailable", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "No cluster leader", http.StatusServiceUnavailable)
		}, ErrUnavailable, 503},
		{"403 carries no sentinel", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Permission denied", http.StatusForbidden)
		}, nil, 403},
		{"a dropped connection is ErrUnavailable", hijackAndClose, ErrUnavailable, 0},
		{"a truncated body is ErrUnavailable", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte(`{"ID":"sandbox-`))
		}, ErrUnavailable, 0},
		{"a slow answer past Timeout is ErrUnavailable", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, ErrUnavailable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReplay(t)
			r.handle("GET", "/v1/job/sandbox-x", tt.handler)
			c := r.client(func(c *Config) { c.Timeout = 200 * time.Millisecond })
			_, err := c.Job(context.Background(), "sandbox-x")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Job: %v (%T), want *Error", err, err)
			}
			if e.Op != OpJob || e.Status != tt.wantStatus || !sameSentinel(e.Err, tt.wantIs) || !sameSentinel(err, tt.wantIs) && tt.wantIs != nil {
				t.Fatalf("Job: %#v, want op %q status %d sentinel %v", e, OpJob, tt.wantStatus, tt.wantIs)
			}
		})
	}
}

// sameSentinel reports whether got is the sentinel want (nil: no sentinel).
func sameSentinel(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

// hijackAndClose drops the connection without an answer.
func hijackAndClose(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func TestAnUnreachableNomadIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there any more
	c, err := New(Config{Address: addr, JobPrefix: testPrefix, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Ping(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping: %v, want ErrUnavailable", err)
	}
}

func TestTheTokenNeverAppearsInErrors(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	echo := func(status int) http.HandlerFunc { // a proxy that echoes the request headers
		return func(w http.ResponseWriter, req *http.Request) {
			http.Error(w, "bad request from "+req.Header.Get("X-Nomad-Token"), status)
		}
	}
	r.handle("GET", "/v1/job/sandbox-x", echo(500))
	r.handle("GET", "/v1/agent/self", echo(403))
	r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", echo(401))
	c := r.client()
	ctx := context.Background()
	_, err1 := c.Job(ctx, "sandbox-x")
	_, err2 := c.Ping(ctx)
	_, err3 := c.Exec(ctx, recAllocID, "main", []string{"true"}, nil, nil, nil)
	for _, err := range []error{err1, err2, err3} {
		if err == nil || strings.Contains(err.Error(), testToken) || strings.Contains(fmt.Sprintf("%#v", err), testToken) {
			t.Fatalf("error %v leaks the token (or is nil)", err)
		}
		if !strings.Contains(err.Error(), "<redacted>") {
			t.Fatalf("error %q: want the echoed token redacted", err)
		}
	}
}

func TestObserveSeesEveryCall(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("agent-self", "error-job-unknown")
	type seen struct {
		op  string
		err error
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	c := r.client(func(c *Config) {
		c.Observe = func(op string, d time.Duration, err error) {
			if d <= 0 {
				t.Errorf("%s: duration %v", op, d)
			}
			mu.Lock()
			got = append(got, seen{op, err})
			mu.Unlock()
		}
	})
	ctx := context.Background()
	_, _ = c.Ping(ctx)
	_, _ = c.Job(ctx, "no-such-job") // refused: no prefix
	_ = c.Purge(ctx, "other-job")    // refused: no prefix
	_, _ = c.Exec(ctx, "", "main", nil, nil, nil, nil)
	mu.Lock()
	defer mu.Unlock()
	wantOps := []string{OpPing, OpJob, OpPurge, OpExec}
	if len(got) != len(wantOps) {
		t.Fatalf("Observe saw %v, want ops %v", got, wantOps)
	}
	for i, op := range wantOps {
		if got[i].op != op {
			t.Fatalf("call %d: op %q, want %q", i, got[i].op, op)
		}
	}
	if got[0].err != nil || !errors.Is(got[1].err, ErrForbiddenJob) || !errors.Is(got[3].err, ErrNotFound) {
		t.Fatalf("Observe errors: %v", got)
	}
}

func TestACancelledContextReturnsItsError(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.handle("GET", "/v1/job/sandbox-x", func(w http.ResponseWriter, req *http.Request) {
		<-req.Context().Done()
	})
	c := r.client()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := c.Job(ctx, "sandbox-x")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Job: %v, want context.Canceled", err)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Fatalf("a cancelled call is not an *Error: %v", err)
	}
}

// Nomad answers "No path to node" when an allocation's client agent is down
// (HTTP 404 on fs/logs, close 1008 on exec; seen on a real 1.6.5 agent):
// that is an unreachable node, not a missing allocation.
func TestNoPathToNodeIsAnUnreachableNode(t *testing.T) {
	c := &Client{cfg: Config{}}
	if err := c.statusError(OpLogs, 404, "No path to node"); !errors.Is(err, ErrNodeUnreachable) || errors.Is(err, ErrNotFound) {
		t.Fatalf("logs 404 No path to node: %v", err)
	}
	if err := c.statusError(OpLogs, 404, `Unknown allocation "x"`); !errors.Is(err, ErrNotFound) {
		t.Fatalf("logs 404 unknown allocation: %v", err)
	}
	if err := c.execReadError(&websocket.CloseError{Code: websocket.ClosePolicyViolation, Text: "No path to node"}); !errors.Is(err, ErrNodeUnreachable) {
		t.Fatalf("exec 1008 No path to node: %v", err)
	}
	if err := c.execReadError(&websocket.CloseError{Code: websocket.ClosePolicyViolation, Text: `Unknown allocation "x"`}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exec 1008 unknown allocation: %v", err)
	}
}
