package nomad

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The recorded IDs (a Nomad v1.6.5 dev agent; see testdata/recordings).
const (
	recAllocID  = "404b4841-9d5c-5949-6c9b-34167a53ef9b"
	recNodeID   = "a8c17bbd-9102-2be0-686b-d75df7c00b86"
	recEvalID   = "f736ab3b-c84b-a1e1-f84d-45d43fce9e42"
	unknownID   = "00000000-1111-2222-3333-444444444444"
	testPrefix  = "sandbox-"                             // the recordings' jobs are sandbox-docker and sandbox-rawexec
	testToken   = "9f1c2e4a-5b6d-4e8f-a0b1-c2d3e4f5a6b7" //nolint:gosec // made up: the redaction tests look for it
	rawexecJob  = "sandbox-rawexec"
	dockerJob   = "sandbox-docker"
	recTaskName = "main"
)

// fixture is one recorded exchange, in the format of the shared recordings
// (see testdata/recordings/README.md).
type fixture struct {
	Request struct {
		Method string `json:"method"`
		Path   string `json:"path"`
	} `json:"request"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	Frames  []wsFrame         `json:"frames"`
}

// wsFrame is one recorded exec WebSocket frame (or the final read event,
// which has no Dir).
type wsFrame struct {
	Dir         string `json:"dir"`
	Type        string `json:"type"`
	Text        string `json:"text"`
	CloseCode   int    `json:"close_code"`
	CloseReason string `json:"close_reason"`
}

// loadFixture reads testdata/recordings/<name>.json.
func loadFixture(t testing.TB, name string) *fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recordings", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &fx
}

// body returns the recorded response bytes: the raw text for {"raw": ...},
// the JSON itself otherwise.
func (fx *fixture) body() []byte {
	var raw struct {
		Raw *string `json:"raw"`
	}
	if json.Unmarshal(fx.Body, &raw) == nil && raw.Raw != nil {
		return []byte(*raw.Raw)
	}
	if string(fx.Body) == "null" {
		return nil
	}
	return fx.Body
}

// path and query split the recorded request path.
func (fx *fixture) path() string {
	u, _ := url.Parse(fx.Request.Path)
	return u.Path
}

func (fx *fixture) query() url.Values {
	u, _ := url.Parse(fx.Request.Path)
	return u.Query()
}

// write replays the recorded response.
func (fx *fixture) write(w http.ResponseWriter) {
	for k, v := range fx.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(fx.Status)
	_, _ = w.Write(fx.body())
}

// seenRequest is what the replay server saw of one request.
type seenRequest struct {
	Method, Path string
	Query        url.Values
	Token        string
}

// replay is an httptest server answering from fixtures, keyed by method and
// path (queries are recorded for the tests to check).
type replay struct {
	t      testing.TB
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	seen   []seenRequest
}

func newReplay(t testing.TB) *replay {
	t.Helper()
	r := &replay{t: t, routes: map[string]http.HandlerFunc{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(r.srv.Close)
	return r
}

// newTLSReplay is newReplay over https; caFile is its certificate as PEM.
func newTLSReplay(t testing.TB) (r *replay, caFile string) {
	t.Helper()
	r = &replay{t: t, routes: map[string]http.HandlerFunc{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(r.srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return r, caFile
}

func (r *replay) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, seenRequest{req.Method, req.URL.Path, req.URL.Query(), req.Header.Get("X-Nomad-Token")})
	h := r.routes[req.Method+" "+req.URL.Path]
	r.mu.Unlock()
	if h == nil {
		r.t.Errorf("replay: no route for %s %s", req.Method, req.URL)
		http.Error(w, "no fixture", http.StatusTeapot)
		return
	}
	h(w, req)
}

// handle routes method and path to h.
func (r *replay) handle(method, path string, h http.HandlerFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[method+" "+path] = h
}

// serve routes each fixture's recorded method and path to its response.
func (r *replay) serve(names ...string) {
	for _, name := range names {
		fx := loadFixture(r.t, name)
		r.handle(fx.Request.Method, fx.path(), func(w http.ResponseWriter, _ *http.Request) { fx.write(w) })
	}
}

// requests returns the requests seen so far.
func (r *replay) requests() []seenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seenRequest(nil), r.seen...)
}

// client builds a Client on the replay server, with the test prefix, a short
// poll interval and the given changes.
func (r *replay) client(mods ...func(*Config)) *Client {
	r.t.Helper()
	cfg := DefaultConfig()
	cfg.Address = r.srv.URL
	cfg.JobPrefix = testPrefix
	cfg.Token = testToken
	cfg.PollInterval = 5 * time.Millisecond
	for _, m := range mods {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// execServer returns a handler that upgrades to a WebSocket and plays the
// fixture's frames: it waits for each recorded client->server text frame
// (checking its text), sends each server->client frame, then drains the
// client until it closes.
func execServer(t testing.TB, fx *fixture) http.HandlerFunc {
	up := websocket.Upgrader{}
	return func(w http.ResponseWriter, req *http.Request) {
		for _, k := range []string{"task", "tty", "command"} {
			if got, want := req.URL.Query().Get(k), fx.query().Get(k); got != want {
				t.Errorf("exec query %s = %q, recorded %q", k, got, want)
			}
		}
		conn, err := up.Upgrade(w, req, nil)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer conn.Close()
		for _, f := range fx.Frames {
			switch {
			case f.Dir == "client->server" && f.Type == "text":
				got, err := readClientText(conn)
				if err != nil {
					return // the client may be gone already (it was told to close)
				}
				if got != f.Text {
					t.Errorf("client frame %q, recorded %q", got, f.Text)
				}
			case f.Dir == "server->client" && f.Type == "text":
				if conn.WriteMessage(websocket.TextMessage, []byte(f.Text)) != nil {
					return
				}
			case f.Dir == "server->client" && f.Type == "close":
				msg := websocket.FormatCloseMessage(f.CloseCode, f.CloseReason)
				_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			}
		}
		drain(conn)
	}
}

// readClientText reads the client's next text frame, skipping heartbeats.
func readClientText(conn *websocket.Conn) (string, error) {
	for {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, b, err := conn.ReadMessage()
		if err != nil {
			return "", err
		}
		if !bytes.Equal(b, []byte("{}")) {
			return string(b), nil
		}
	}
}

// drain reads until the client closes (or 5 s pass).
func drain(conn *websocket.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
	}
}
