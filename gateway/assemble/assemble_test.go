package assemble_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/assemble"
	"sandgate/gateway/token"
	"sandgate/internal/pgtest"
	"sandgate/policies"
	"sandgate/store"
	"sandgate/store/bolt"
)

// engine is the embedded bundle, compiled once for the package's tests.
var engine = sync.OnceValues(func() (*policies.Engine, error) {
	return policies.New(context.Background(), policies.Config{})
})

// nomadStub is a Nomad API that fails every call with 500; a config whose
// client is never called may use it too.
var nomadStub = sync.OnceValue(func() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "stub", http.StatusInternalServerError)
	}))
})

// config is a Config for dir with the embedded bundle and the stub Nomad.
func config(t *testing.T, dir string) assemble.Config {
	t.Helper()
	e, err := engine()
	if err != nil {
		t.Fatal(err)
	}
	c := assemble.DefaultConfig()
	c.DataDir, c.Engine = dir, e
	c.Nomad.Address = nomadStub().URL
	c.Gateway.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return c
}

// open opens c and registers its Close as a cleanup.
func open(t *testing.T, c assemble.Config) *assemble.Gateway {
	t.Helper()
	g, err := assemble.Open(t.Context(), c)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// get answers GET path from the server in process.
func get(t *testing.T, g *assemble.Gateway, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	g.Server.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// filesOpenUnder lists the files under dir this process holds open (from
// /proc/self/fd); ok is false where there is no /proc to ask.
func filesOpenUnder(t *testing.T, dir string) (open []string, ok bool) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			open = append(open, target)
		}
	}
	return open, true
}

// assertReleased fails t if anything under dir is still open, or if the
// store file at path cannot be locked at once (bbolt holds an flock while
// open, in this process too).
func assertReleased(t *testing.T, dir, path string) {
	t.Helper()
	if open, ok := filesOpenUnder(t, dir); ok && len(open) > 0 {
		t.Errorf("still open: %v", open)
	}
	if _, err := os.Stat(path); err != nil {
		return // never created
	}
	st, err := bolt.Open(path, bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Errorf("the store was left open: %v", err)
		return
	}
	_ = st.Close()
}

func TestOpenBuildsTheGatewayOnTheDataDirAndCloseReleasesIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := config(t, dir)
	var adjusted *gateway.Config
	c.AdjustGateway = func(gc *gateway.Config) { cp := *gc; adjusted = &cp }
	g, err := assemble.Open(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{assemble.StoreFile, assemble.DecisionLogFile, assemble.KeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want a 0600 file", f, fi, err)
		}
	}
	if g.ServerStore != g.Store || g.Engine != c.Engine {
		t.Errorf("parts: server store %v, store %v, engine %p", g.ServerStore, g.Store, g.Engine)
	}
	if adjusted == nil || adjusted.Engine != c.Engine || adjusted.Store != g.Store || adjusted.Tokens != g.Issuer ||
		adjusted.Decisions != g.Decisions || adjusted.Nomad != g.Nomad {
		t.Errorf("AdjustGateway saw %+v, want the parts Open opened", adjusted)
	}
	if body := get(t, g, "/healthz"); !strings.Contains(body, `"ok"`) {
		t.Errorf("healthz: %s", body)
	}
	// A decision is logged to the data dir's decision log.
	raw, _, err := gateway.MintToken(t.Context(), g.Issuer, g.Store, g.Engine.Settings(),
		gateway.TokenRequest{Role: token.RoleOperator, Subject: "op", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+raw)
	rec := httptest.NewRecorder()
	g.Server.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("list: %d %s", rec.Code, rec.Body)
	}
	if b, err := os.ReadFile(filepath.Join(dir, assemble.DecisionLogFile)); err != nil || !strings.Contains(string(b), `"allow":true`) {
		t.Errorf("decision log: %q, %v", b, err)
	}
	if open, ok := filesOpenUnder(t, dir); ok && len(open) == 0 {
		t.Error("nothing under the data dir is open: the check below cannot see a leak")
	}

	g.Close()
	assertReleased(t, dir, filepath.Join(dir, assemble.StoreFile))
	g.Close() // a second Close does nothing
	var none *assemble.Gateway
	none.Close()
}

func TestOpenRefusesAConfigItCannotBuildFromAndWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		adjust func(*assemble.Config)
		want   string
	}{
		{"an unknown store driver, naming store.driver", func(c *assemble.Config) { c.Store.Driver = "sqlite" }, `store.driver: unknown driver "sqlite" (known: bolt, postgres)`},
		{"the postgres driver without a DSN", func(c *assemble.Config) { c.Store.Driver = assemble.DriverPostgres }, "store.dsn: required by the postgres driver"},
		{"a DSN for the bolt driver", func(c *assemble.Config) { c.Store.DSN = "postgres://db/sandgate" }, `store.dsn: set, but store.driver is "bolt"`},
		{"a file for the postgres driver", func(c *assemble.Config) {
			c.Store.Driver, c.Store.DSN, c.Store.Path = assemble.DriverPostgres, "postgres://db/sandgate", "x.db"
		}, "store.path: set, but the postgres driver keeps no file"},
		{"no policy engine", func(c *assemble.Config) { c.Engine = nil }, "Engine: required"},
		{"no data dir", func(c *assemble.Config) { c.DataDir = "" }, "DataDir: required"},
		{"a key and a key file", func(c *assemble.Config) {
			_, c.Token.Key, _ = ed25519.GenerateKey(rand.Reader)
			c.KeyFile = "other.key"
		}, "Token.Key, KeyFile: set together; the keys come from one place"},
		{"a key dir and a key file", func(c *assemble.Config) {
			c.KeyDir, c.KeyFile = "keys", "other.key"
		}, "KeyFile, KeyDir: set together"},
		{"a key dir and key files", func(c *assemble.Config) {
			c.KeyDir, c.KeyFiles = "keys", []string{"a.pem"}
		}, "KeyDir, KeyFiles: set together"},
		{"an active kid for a key dir", func(c *assemble.Config) {
			c.KeyDir, c.ActiveKID = "keys", "kid"
		}, `ActiveKID: set without KeyFiles; a KeyDir names its active key in its "active" file`},
		{"verification keys without a key", func(c *assemble.Config) {
			c.KeyDir, c.Token.VerifyKeys = "keys", []ed25519.PublicKey{make(ed25519.PublicKey, ed25519.PublicKeySize)}
		}, "Token.VerifyKeys: set without Token.Key; with KeyDir the verification keys come from there"},
		{"more key files than a set holds", func(c *assemble.Config) {
			c.KeyFiles = make([]string, token.MaxKeys+1)
		}, "KeyFiles: 9 files, at most 8 keys"},
		{"a part of the server's config that Open fills", func(c *assemble.Config) { c.Gateway.Tokens = &token.Issuer{} },
			"Gateway.Tokens: set, but Open fills it"},
		{"another job prefix than the policy's", func(c *assemble.Config) { c.Nomad.JobPrefix = "other-" }, `Nomad.JobPrefix: "other-" is not the policy's job prefix`},
		{"another namespace for the server than the client's", func(c *assemble.Config) {
			c.Nomad.Namespace, c.Gateway.Namespace = "a", "b"
		}, `Gateway.Namespace: "b" is not the Nomad client's namespace "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			c := config(t, dir)
			tc.adjust(&c)
			g, err := assemble.Open(t.Context(), c)
			if err == nil {
				g.Close()
				t.Fatal("opened")
			}
			if g != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want an error containing %q", g, err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data dir was written: %v", err)
			}
		})
	}
}

func TestTheSigningKeyFileIsCreatedWhenAbsentAndReusedAfter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	iss, created, err := assemble.OpenIssuer(config(t, dir))
	if err != nil || !created {
		t.Fatalf("first open: created=%v err=%v", created, err)
	}
	raw, _, err := iss.Mint(token.MintRequest{Role: token.RoleAgent, Subject: "ci", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	g := open(t, config(t, dir))
	if _, err := g.Issuer.Verify(raw); err != nil || !g.Issuer.PublicKey().Equal(iss.PublicKey()) {
		t.Fatalf("the gateway did not reuse the key: %v", err)
	}
	if _, created, err := assemble.OpenIssuer(config(t, dir)); err != nil || created {
		t.Fatalf("third open: created=%v err=%v", created, err)
	}

	// KeyFile elsewhere; Token.Key writes no file at all.
	other := config(t, t.TempDir())
	other.KeyFile = filepath.Join(t.TempDir(), "keys", "gateway.key")
	if _, created, err := assemble.OpenIssuer(other); err != nil || !created {
		t.Fatalf("key file elsewhere: created=%v err=%v", created, err)
	}
	if _, err := os.Stat(filepath.Join(other.DataDir, assemble.KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key was written to the data dir too: %v", err)
	}
	inMemory := config(t, t.TempDir())
	_, inMemory.Token.Key, _ = ed25519.GenerateKey(rand.Reader)
	g2 := open(t, inMemory)
	if !g2.Issuer.PublicKey().Equal(inMemory.Token.Key.Public()) {
		t.Error("the issuer does not sign with Token.Key")
	}
	if _, err := os.Stat(filepath.Join(inMemory.DataDir, assemble.KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Token.Key was set, yet a key file was written: %v", err)
	}

	// A key file anyone may read is refused, not replaced.
	loose := config(t, t.TempDir())
	if err := os.Chmod(filepath.Join(dir, assemble.KeyFile), 0o644); err != nil { //nolint:gosec // a key anyone may read, on purpose
		t.Fatal(err)
	}
	loose.KeyFile = filepath.Join(dir, assemble.KeyFile)
	if _, err := assemble.Open(t.Context(), loose); !errors.Is(err, token.ErrKeyPermissions) {
		t.Fatalf("a 0644 key: %v, want ErrKeyPermissions", err)
	}
	assertReleased(t, loose.DataDir, filepath.Join(loose.DataDir, assemble.StoreFile))
}

func TestAFailedOpenClosesWhatItOpened(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		adjust func(t *testing.T, c *assemble.Config)
		want   string
	}{
		{"the decision log's directory cannot be created", func(t *testing.T, c *assemble.Config) {
			file := filepath.Join(t.TempDir(), "a-file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			c.Audit.Path = filepath.Join(file, "logs", assemble.DecisionLogFile)
		}, "audit: mkdir"},
		{"the Nomad client refuses its address", func(_ *testing.T, c *assemble.Config) { c.Nomad.Address = "ftp://nomad" }, "nomad client:"},
		{"the server refuses its config", func(_ *testing.T, c *assemble.Config) { c.Gateway.BodyLimit = 10 }, "BodyLimit 10 is below 1 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			c := config(t, dir)
			tc.adjust(t, &c)
			g, err := assemble.Open(t.Context(), c)
			if err == nil {
				g.Close()
				t.Fatal("opened")
			}
			if g != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want an error containing %q", g, err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, assemble.StoreFile)); err != nil {
				t.Fatalf("the store was not opened before the failure: the case tests nothing: %v", err)
			}
			assertReleased(t, dir, filepath.Join(dir, assemble.StoreFile))
		})
	}
}

// countingStore is a store whose per-state counts say 7 sandboxes run.
type countingStore struct{ store.Store }

func (countingStore) Counts(context.Context) (map[store.State]int64, error) {
	return map[store.State]int64{store.StateRunning: 7}, nil
}

func TestWrapStoreWrapsOnlyTheServersStore(t *testing.T) {
	t.Parallel()
	c := config(t, t.TempDir())
	c.WrapStore = func(s store.Store) store.Store { return countingStore{s} }
	g := open(t, c)
	if _, ok := g.ServerStore.(countingStore); !ok {
		t.Fatalf("ServerStore is %T", g.ServerStore)
	}
	if _, ok := g.Store.(*bolt.Store); !ok {
		t.Fatalf("Store is %T, want the bare *bolt.Store", g.Store)
	}
	if m := get(t, g, "/metrics"); !strings.Contains(m, `sandgate_sandboxes{state="running"} 7`) {
		t.Errorf("the server does not count with the wrapped store:\n%s", grep(m, "sandgate_sandboxes{"))
	}
}

func TestTheNomadObserveHookReachesTheServer(t *testing.T) {
	t.Parallel()
	for _, observe := range []bool{true, false} {
		t.Run(fmt.Sprintf("ObserveNomad=%v", observe), func(t *testing.T) {
			t.Parallel()
			c := config(t, t.TempDir())
			c.ObserveNomad = observe
			var own []string
			var mu sync.Mutex
			c.Nomad.Observe = func(op string, _ time.Duration, err error) {
				mu.Lock()
				defer mu.Unlock()
				own = append(own, fmt.Sprintf("%s %v", op, err != nil))
			}
			g := open(t, c)
			if _, err := g.Nomad.Ping(t.Context()); err == nil {
				t.Fatal("the stub Nomad answered a ping")
			}
			want := map[bool]string{true: "1", false: "0"}[observe]
			m := get(t, g, "/metrics")
			for _, line := range []string{
				`sandgate_nomad_errors_total{op="ping"} ` + want,
				`sandgate_nomad_request_duration_seconds_count{op="ping"} ` + want,
			} {
				if !strings.Contains(m, line+"\n") {
					t.Errorf("metrics lack %q:\n%s", line, grep(m, "sandgate_nomad_"))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(own) != 1 || own[0] != "ping true" {
				t.Errorf("the caller's own Observe saw %q, want one failed ping", own)
			}
		})
	}
}

// grep is the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

func TestOpenStoreOpensTheStoreAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := assemble.DefaultConfig()
	c.DataDir = dir // no engine, no Nomad address: the store needs neither
	st, err := assemble.OpenStore(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutNode(t.Context(), store.Node{Name: "worker-1", Enrollment: "sandbox", State: "active"}); err != nil {
		t.Fatal(err)
	}
	if _, err := assemble.OpenStore(t.Context(), c); !errors.Is(err, bolt.ErrLocked) {
		t.Errorf("a second open while the first holds the file: %v, want bolt.ErrLocked", err)
	}
	_ = st.Close()
	g := open(t, config(t, dir))
	if n, err := g.Store.GetNode(t.Context(), "worker-1"); err != nil || n.Enrollment != "sandbox" {
		t.Fatalf("the gateway's store is another: %+v %v", n, err)
	}
	c.Store.Driver = "sqlite"
	if _, err := assemble.OpenStore(t.Context(), c); err == nil || !strings.Contains(err.Error(), "store.driver") {
		t.Fatalf("unknown driver: %v", err)
	}
}

// Open builds the gateway on a data dir: the store, the decision log and
// the signing key are created there.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "sandgate-example-")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	e, err := engine()
	if err != nil {
		panic(err)
	}
	c := assemble.DefaultConfig()
	c.DataDir, c.Engine = dir, e
	c.Nomad.Address = "http://127.0.0.1:4646"
	c.Gateway.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := assemble.Open(context.Background(), c)
	if err != nil {
		panic(err)
	}
	defer g.Close()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// decisions.jsonl
	// sandgate.db
	// signing.key
}

// The postgres driver builds the same gateway on a shared database: two
// gateways opened on it see one set of records, and neither keeps a store
// file in its data dir.
func TestThePostgresDriverSharesOneDatabaseBetweenGateways(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	var gws []*assemble.Gateway
	for i := range 2 {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("data-%d", i))
		c := config(t, dir)
		c.Store.Driver, c.Store.DSN = assemble.DriverPostgres, dsn
		gws = append(gws, open(t, c))
		if _, err := os.Stat(filepath.Join(dir, assemble.StoreFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the postgres driver left a bbolt file in the data dir: %v", err)
		}
	}
	if err := gws[0].Store.PutNode(t.Context(), store.Node{Name: "worker-1", Enrollment: "sandbox", State: "active"}); err != nil {
		t.Fatal(err)
	}
	if n, err := gws[1].Store.GetNode(t.Context(), "worker-1"); err != nil || n.Enrollment != "sandbox" {
		t.Fatalf("the second gateway does not see the first one's node: %+v %v", n, err)
	}
	if err := gws[1].Store.Ping(t.Context()); err != nil {
		t.Fatalf("ping: %v", err)
	}
}
