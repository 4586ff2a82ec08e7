package apitest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"sandgate/gateway/apitest"
)

// fakeT is a testing.TB that records failures: Fatalf and FailNow end the
// goroutine, as the testing package's do, so run calls f in its own.
type fakeT struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	fatal  bool
	msgs   []string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

func (f *fakeT) Fatalf(format string, args ...any) { f.Errorf(format, args...); f.FailNow() }

func (f *fakeT) Fatal(args ...any) { f.Errorf("%s", fmt.Sprint(args...)); f.FailNow() }

func (f *fakeT) FailNow() {
	f.mu.Lock()
	f.failed, f.fatal = true, true
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls f with a fresh fakeT and returns it once f has returned or
// stopped.
func run(f func(t testing.TB)) *fakeT {
	ft := &fakeT{}
	done := make(chan struct{})
	go func() { defer close(done); f(ft) }()
	<-done
	return ft
}

// problem is a well-formed policy refusal: 403 policy_denied by T2.
func problem() map[string]any {
	return map[string]any{
		"type": apitest.ProblemType + "policy_denied", "title": "Denied by policy", "status": 403,
		"code": "policy_denied", "rule_ids": []string{"T2"}, "decision_id": "d-1", "request_id": "r-1",
	}
}

func reply(status int, contentType string, doc map[string]any) apitest.Reply {
	b, _ := json.Marshal(doc)
	return apitest.Reply{Status: status, Header: http.Header{"Content-Type": {contentType}}, Body: b}
}

func TestExpectProblemFailsOnEveryMismatch(t *testing.T) {
	t.Parallel()
	without := func(k string) map[string]any { m := problem(); delete(m, k); return m }
	with := func(k string, v any) map[string]any { m := problem(); m[k] = v; return m }
	cases := []struct {
		name  string
		r     apitest.Reply
		rules []string
		fails bool
	}{
		{name: "a matching problem passes", r: reply(403, "application/problem+json", problem()), rules: []string{"T2"}},
		{name: "a matching problem passes without rules asked", r: reply(403, "application/problem+json", problem())},
		{name: "another HTTP status fails", r: reply(409, "application/problem+json", problem()), fails: true},
		{name: "another code fails", r: reply(403, "application/problem+json", with("code", "sandbox_not_found")), fails: true},
		{name: "plain JSON fails", r: reply(403, "application/json", problem()), fails: true},
		{name: "a missing rule id fails", r: reply(403, "application/problem+json", problem()), rules: []string{"T2", "E1"}, fails: true},
		{name: "another type fails", r: reply(403, "application/problem+json", with("type", "about:blank")), fails: true},
		{name: "a missing title fails", r: reply(403, "application/problem+json", without("title")), fails: true},
		{name: "a missing request_id fails", r: reply(403, "application/problem+json", without("request_id")), fails: true},
		{name: "another status member fails", r: reply(403, "application/problem+json", with("status", 400)), fails: true},
		{name: "a body that is not JSON fails", r: apitest.Reply{Status: 403, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: []byte("denied")}, fails: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var m map[string]any
			ft := run(func(tb testing.TB) { m = apitest.ExpectProblem(tb, c.r, 403, "policy_denied", c.rules...) })
			if ft.fatal != c.fails {
				t.Fatalf("failed %v, want %v: %q", ft.fatal, c.fails, ft.msgs)
			}
			if !c.fails && m["decision_id"] != "d-1" {
				t.Fatalf("the problem returned: %v", m)
			}
			// CheckProblem reports the same, without stopping.
			var ok bool
			ct := run(func(tb testing.TB) { _, ok = apitest.CheckProblem(tb, c.r, 403, "policy_denied", c.rules...) })
			if ct.fatal || ct.failed != c.fails || ok == c.fails {
				t.Fatalf("CheckProblem: failed %v, stopped %v, ok %v; want failed %v without stopping", ct.failed, ct.fatal, ok, c.fails)
			}
		})
	}
}

// seen is one request as the server received it.
type seen struct {
	method, path, auth, contentType, key string
	length                               int64
	body                                 string
}

func echoServer(t *testing.T) (*httptest.Server, func() seen) {
	t.Helper()
	var mu sync.Mutex
	var last seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = seen{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), r.ContentLength, string(b)}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, func() seen { mu.Lock(); defer mu.Unlock(); return last }
}

func TestDoSendsEachBodyTypeAsStated(t *testing.T) {
	t.Parallel()
	srv, last := echoServer(t)
	a := &apitest.API{T: t, URL: srv.URL}
	cases := []struct {
		name string
		body any
		want seen
	}{
		{name: "nil sends no body and no Content-Type", body: nil, want: seen{contentType: "", body: ""}},
		{name: "a string is sent as it is, as JSON", body: `{"argv":["true"]}`, want: seen{contentType: "application/json", body: `{"argv":["true"]}`, length: 17}},
		{name: "a raw message is sent as it is, as JSON", body: json.RawMessage(`[1]`), want: seen{contentType: "application/json", body: `[1]`, length: 3}},
		{name: "a reader is sent as it is, as JSON", body: strings.NewReader(`{}`), want: seen{contentType: "application/json", body: `{}`, length: 2}},
		{name: "a reader of unknown length is sent chunked", body: io.MultiReader(strings.NewReader(`{}`)), want: seen{contentType: "application/json", body: `{}`, length: -1}},
		{name: "bytes are sent as an octet stream with their length", body: []byte{0, 1, 2}, want: seen{contentType: "application/octet-stream", body: "\x00\x01\x02", length: 3}},
		{name: "a value is marshalled to JSON", body: map[string]any{"ttl_seconds": 60}, want: seen{contentType: "application/json", body: `{"ttl_seconds":60}`, length: 18}},
	}
	for _, c := range cases {
		// One server records the last request: not parallel.
		t.Run(c.name, func(t *testing.T) {
			a.T = t
			r := a.Do(http.MethodPut, "/v1/x?y=1", "tok", c.body)
			if r.Status != http.StatusTeapot || r.Header.Get("Content-Type") != "application/json" || r.JSON(t)["ok"] != true {
				t.Fatalf("the reply: %s", r)
			}
			got := last()
			want := c.want
			want.method, want.path, want.auth = http.MethodPut, "/v1/x?y=1", "Bearer tok"
			if got != want {
				t.Fatalf("the server saw %+v, want %+v", got, want)
			}
		})
	}
	t.Run("DoWith sends a raw Authorization, a Content-Type and more headers", func(t *testing.T) {
		a.T = t
		a.DoWith(apitest.Request{Method: http.MethodPost, Path: "/p", Token: "ignored", Auth: "Basic eA==", Body: "x", ContentType: "application/gzip", Header: map[string]string{"Idempotency-Key": "k-1"}})
		want := seen{method: http.MethodPost, path: "/p", auth: "Basic eA==", contentType: "application/gzip", key: "k-1", length: 1, body: "x"}
		if got := last(); got != want {
			t.Fatalf("the server saw %+v, want %+v", got, want)
		}
	})
	t.Run("no token sends no Authorization", func(t *testing.T) {
		a.T = t
		a.Do(http.MethodGet, "/", "", nil)
		if got := last(); got.auth != "" {
			t.Fatalf("Authorization %q", got.auth)
		}
	})
}

func TestCreateFailsOnAnythingButACreatedSandbox(t *testing.T) {
	t.Parallel()
	answers := map[string]struct {
		status int
		body   string
	}{
		"/ok/v1/sandboxes":       {http.StatusCreated, `{"id":"sb-1","token":"s-1","state":"running"}`},
		"/denied/v1/sandboxes":   {http.StatusForbidden, `{"code":"policy_denied"}`},
		"/no-token/v1/sandboxes": {http.StatusCreated, `{"id":"sb-1"}`},
	}
	var mu sync.Mutex
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotBody = string(b)
		mu.Unlock()
		a := answers[r.URL.Path]
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)

	var c apitest.Created
	if ft := run(func(tb testing.TB) { c = (&apitest.API{T: tb, URL: srv.URL + "/ok"}).Create("tok", nil) }); ft.failed {
		t.Fatalf("a 201 failed: %q", ft.msgs)
	}
	mu.Lock()
	sent := gotBody
	mu.Unlock()
	if id, tok := c.IDToken(); id != "sb-1" || tok != "s-1" || c.State != "running" || sent != "{}" {
		t.Fatalf("created %+v from the body %q", c, sent)
	}
	for _, p := range []string{"/denied", "/no-token"} {
		if ft := run(func(tb testing.TB) { (&apitest.API{T: tb, URL: srv.URL + p}).Create("tok", nil) }); !ft.fatal {
			t.Fatalf("%s: Create did not fail", p)
		} else if !strings.Contains(strings.Join(ft.msgs, "\n"), "create") {
			t.Fatalf("%s: the failure does not say create: %q", p, ft.msgs)
		}
	}
}
