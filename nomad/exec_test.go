package nomad

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// execAllocID and execArgv read the recorded request of an exec fixture.
func execRequest(t *testing.T, fx *fixture) (allocID, task string, argv []string) {
	t.Helper()
	parts := strings.Split(fx.path(), "/") // /v1/client/allocation/<id>/exec
	if err := json.Unmarshal([]byte(fx.query().Get("command")), &argv); err != nil {
		t.Fatal(err)
	}
	return parts[4], fx.query().Get("task"), argv
}

func TestExecReplaysTheRecordings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture        string
		stdin          string
		wantCode       int
		wantOut        string
		wantErr        string
		wantIs         error
		wantStatus     int
		wantErrMessage string
	}{
		{fixture: "exec-echo-hi", wantOut: "hi\n"},
		{fixture: "exec-sh-exit3", wantCode: 3, wantOut: "out\n", wantErr: "err\n"},
		{fixture: "exec-cat-stdin", stdin: "abc\n", wantOut: "abc\n"},
		{fixture: "exec-unknown-alloc", wantCode: -1, wantIs: ErrNotFound, wantStatus: 1008,
			wantErrMessage: `Unknown allocation "` + unknownID + `"`},
		{fixture: "exec-command-not-found", wantCode: -1, wantIs: ErrCommandNotStarted, wantStatus: 1011,
			wantErrMessage: `executable file not found in $PATH`},
		{fixture: "exec-unknown-task", wantCode: -1, wantStatus: 1011, wantErrMessage: "task not found"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			fx := loadFixture(t, tt.fixture)
			r := newReplay(t)
			r.handle("GET", fx.path(), execServer(t, fx))
			allocID, task, argv := execRequest(t, fx)
			var stdout, stderr bytes.Buffer
			code, err := r.client().Exec(context.Background(), allocID, task, argv, []byte(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode || stdout.String() != tt.wantOut || stderr.String() != tt.wantErr {
				t.Fatalf("Exec = %d, stdout %q, stderr %q, err %v", code, stdout.String(), stderr.String(), err)
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("Exec: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Op != OpExec || e.Status != tt.wantStatus || !sameSentinel(e.Err, tt.wantIs) ||
				!strings.Contains(e.Msg, tt.wantErrMessage) {
				t.Fatalf("Exec error = %#v, want status %d, sentinel %v, message %q", err, tt.wantStatus, tt.wantIs, tt.wantErrMessage)
			}
			if got := r.requests()[0].Token; got != testToken {
				t.Fatalf("X-Nomad-Token = %q", got)
			}
		})
	}
}

// execHandler upgrades and hands the connection to play after the client's
// stdin close arrived.
func execHandler(t *testing.T, play func(*websocket.Conn)) http.HandlerFunc {
	up := websocket.Upgrader{}
	return func(w http.ResponseWriter, req *http.Request) {
		conn, err := up.Upgrade(w, req, nil)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer conn.Close()
		if got, err := readClientText(conn); err != nil || got != `{"stdin":{"close":true}}` {
			t.Errorf("first client frame %q, %v; want the stdin close", got, err)
		}
		play(conn)
	}
}

func TestExecWithoutAnExitCodeIsDropped(t *testing.T) {
	t.Parallel()
	hi := []byte(`{"stdout":{"data":"aGkK"}}`)
	tests := []struct {
		name string
		play func(*websocket.Conn)
	}{
		{"a normal close before the exited frame", func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.TextMessage, hi)
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
			drain(c)
		}},
		{"an abrupt close (the agent crashed)", func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.TextMessage, hi)
			_ = c.NetConn().Close()
		}},
		{"an exited frame without a result", func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.TextMessage, hi)
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"exited":true}`))
			drain(c)
		}},
		{"a going-away close", func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.TextMessage, hi)
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1001, "shutting down"), time.Now().Add(time.Second))
			drain(c)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReplay(t)
			r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", execHandler(t, tt.play))
			var stdout bytes.Buffer
			code, err := r.client().Exec(context.Background(), recAllocID, "main", []string{"echo", "hi"}, nil, &stdout, nil)
			if code != -1 || !errors.Is(err, ErrExecDropped) {
				t.Fatalf("Exec = %d, %v; want -1 and ErrExecDropped", code, err)
			}
			if stdout.String() != "hi\n" {
				t.Fatalf("stdout %q: the output before the drop is kept", stdout.String())
			}
		})
	}
}

func TestExecCancellation(t *testing.T) {
	t.Parallel()
	t.Run("mid-stream", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", execHandler(t, drain)) // like `sleep 30`
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		code, err := r.client().Exec(ctx, recAllocID, "main", []string{"sleep", "30"}, nil, nil, nil)
		if code != -1 || !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Fatalf("Exec = %d, %v after %v; want -1, context.Canceled, promptly", code, err, time.Since(start))
		}
	})
	t.Run("during the handshake", func(t *testing.T) {
		t.Parallel()
		r := newReplay(t)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", func(_ http.ResponseWriter, req *http.Request) {
			select { // never answers the upgrade
			case <-req.Context().Done():
			case <-release:
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := r.client().Exec(ctx, recAllocID, "main", []string{"true"}, nil, nil, nil)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Fatalf("Exec = %v after %v; want context.Canceled, promptly", err, time.Since(start))
		}
	})
}

func TestExecHandshakeFailures(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "No path to node", http.StatusServiceUnavailable)
	})
	r.handle("GET", "/v1/client/allocation/"+unknownID+"/exec", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "alloc not found", http.StatusNotFound)
	})
	c := r.client(func(c *Config) { c.Namespace, c.Region = "ns1", "eu" })
	ctx := context.Background()
	_, err := c.Exec(ctx, recAllocID, "main", []string{"true"}, nil, nil, nil)
	var e *Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &e) || e.Status != 503 || e.Msg != "No path to node" {
		t.Fatalf("Exec = %#v, want ErrUnavailable with status 503", err)
	}
	if _, err := c.Exec(ctx, unknownID, "main", []string{"true"}, nil, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Exec = %v, want ErrNotFound", err)
	}
	q := r.requests()[0].Query
	if q.Get("namespace") != "ns1" || q.Get("region") != "eu" || q.Get("tty") != "false" {
		t.Fatalf("exec query %v lacks the namespace, region or tty=false", q)
	}
	if _, err := c.Exec(ctx, "../../agent/self", "main", []string{"true"}, nil, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Exec(path) = %v, want ErrNotFound", err)
	}
	if _, err := c.Exec(ctx, recAllocID, "main", nil, nil, nil, nil); err == nil {
		t.Fatal("Exec without argv succeeded")
	}
	if n := len(r.requests()); n != 2 {
		t.Fatalf("%d requests, want 2 (invalid arguments send none)", n)
	}
}

func TestExecSendsLargeStdinInChunks(t *testing.T) {
	t.Parallel()
	in := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80,000 bytes: five frames
	r := newReplay(t)
	up := websocket.Upgrader{}
	r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", func(w http.ResponseWriter, req *http.Request) {
		conn, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var got []byte
		for {
			text, err := readClientText(conn)
			if err != nil {
				t.Errorf("read: %v", err)
				return
			}
			var f struct {
				Stdin struct {
					Data  []byte `json:"data"`
					Close bool   `json:"close"`
				} `json:"stdin"`
			}
			_ = json.Unmarshal([]byte(text), &f)
			if f.Stdin.Close {
				break
			}
			got = append(got, f.Stdin.Data...)
		}
		if !bytes.Equal(got, in) {
			t.Errorf("server received %d stdin bytes, want %d", len(got), len(in))
		}
		_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"exited":true,"result":{"exit_code":7}}`))
		drain(conn)
	})
	code, err := r.client().Exec(context.Background(), recAllocID, "main", []string{"cat"}, in, nil, nil)
	if code != 7 || err != nil {
		t.Fatalf("Exec = %d, %v; want 7", code, err)
	}
}

// stdinServer records the stdin a client sends until its close frame or
// the end of the connection, then answers nothing (the command still
// waits), like the real agent's docker driver.
func stdinServer(t *testing.T, got chan<- string) http.HandlerFunc {
	up := websocket.Upgrader{}
	return func(w http.ResponseWriter, req *http.Request) {
		conn, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var data []byte
		for {
			text, err := readClientText(conn)
			if err != nil {
				got <- string(data) + "|broken"
				return
			}
			var f struct {
				Stdin struct {
					Data  []byte `json:"data"`
					Close bool   `json:"close"`
				} `json:"stdin"`
			}
			_ = json.Unmarshal([]byte(text), &f)
			data = append(data, f.Stdin.Data...)
			if f.Stdin.Close {
				got <- string(data) + "|closed"
				drain(conn)
				return
			}
		}
	}
}

// failingReader returns its data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// A streamed stdin that breaks, or a ctx that ends while it is read,
// closes the command's stdin before the stream: Nomad never ends it
// itself, and a command reading it would wait until the task stops.
func TestExecReaderClosesStdinWhenItsSourceBreaks(t *testing.T) {
	t.Parallel()
	t.Run("a read error", func(t *testing.T) {
		t.Parallel()
		got := make(chan string, 1)
		r := newReplay(t)
		r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", stdinServer(t, got))
		in := &failingReader{data: []byte("half of it"), err: errors.New("unexpected EOF")}
		code, err := r.client().ExecReader(context.Background(), recAllocID, "main", []string{"cat"}, in, nil, nil)
		if code != -1 || !errors.Is(err, ErrExecDropped) {
			t.Fatalf("ExecReader = %d, %v; want -1, ErrExecDropped", code, err)
		}
		if s := <-got; s != "half of it|closed" {
			t.Fatalf("the server received %q; want the data, then the stdin close", s)
		}
	})
	t.Run("ctx ends while stdin is read", func(t *testing.T) {
		t.Parallel()
		got := make(chan string, 1)
		r := newReplay(t)
		r.handle("GET", "/v1/client/allocation/"+recAllocID+"/exec", stdinServer(t, got))
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() })
		go func() { _, _ = pw.Write([]byte("some")) }() // then nothing more: a stalled upload
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		code, err := r.client().ExecReader(ctx, recAllocID, "main", []string{"cat"}, pr, nil, nil)
		if code != -1 || !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Fatalf("ExecReader = %d, %v after %v; want -1, context.Canceled, promptly", code, err, time.Since(start))
		}
		if s := <-got; s != "some|closed" {
			t.Fatalf("the server received %q; want the data, then the stdin close", s)
		}
	})
}

func TestTLSWithACACertCoversHTTPAndExec(t *testing.T) {
	t.Parallel()
	r, caFile := newTLSReplay(t)
	r.serve("agent-self")
	fx := loadFixture(t, "exec-echo-hi")
	r.handle("GET", fx.path(), execServer(t, fx))
	c := r.client(func(c *Config) { c.TLS.CACert = caFile })
	ctx := context.Background()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping over https: %v", err)
	}
	var out bytes.Buffer
	code, err := c.Exec(ctx, recAllocID, "main", []string{"echo", "hi"}, nil, &out, nil)
	if code != 0 || err != nil || out.String() != "hi\n" {
		t.Fatalf("Exec over wss = %d, %q, %v", code, out.String(), err)
	}
	untrusted := r.client() // no CA: the certificate is refused
	if _, err := untrusted.Ping(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping with an untrusted certificate = %v, want ErrUnavailable", err)
	}
	if _, err := untrusted.Exec(ctx, recAllocID, "main", []string{"echo", "hi"}, nil, nil, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Exec with an untrusted certificate = %v, want ErrUnavailable", err)
	}
}
