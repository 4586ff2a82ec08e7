package nomadsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// recAllocID is the allocation the exec fixtures were recorded against.
const recAllocID = "404b4841-9d5c-5949-6c9b-34167a53ef9b"

// wsEvent is a frame the client received: a text frame or a close frame.
type wsEvent struct {
	text   string
	close  bool
	code   int
	reason string
}

func (e wsEvent) String() string {
	if e.close {
		return "close " + strings.TrimSpace(strings.Join([]string{itoa(e.code), e.reason}, " "))
	}
	return e.text
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

type wsClient struct {
	t      *testing.T
	conn   *websocket.Conn
	events chan wsEvent
	resp   *http.Response
}

// dialExec opens an exec WebSocket like nomad/api does (gorilla's Dialer),
// recording server close frames and echoing them (RFC 6455 handshake).
func dialExec(t *testing.T, url, path string) *wsClient {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http")+path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	if resp.Body != nil {
		_ = resp.Body.Close()
	}
	c := &wsClient{t: t, conn: conn, events: make(chan wsEvent, 1024), resp: resp}
	conn.SetCloseHandler(func(code int, text string) error {
		c.events <- wsEvent{close: true, code: code, reason: text}
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
		return nil
	})
	go func() {
		defer close(c.events)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			c.events <- wsEvent{text: string(msg)}
		}
	}()
	t.Cleanup(func() { _ = conn.Close() })
	return c
}

func (c *wsClient) send(text string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(text)); err != nil {
		c.t.Fatalf("send %s: %v", text, err)
	}
}

// next returns the next event, or false after d without one (or at EOF).
func (c *wsClient) next(d time.Duration) (wsEvent, bool) {
	select {
	case e, ok := <-c.events:
		return e, ok
	case <-time.After(d):
		return wsEvent{}, false
	}
}

// rest collects events until the connection ends.
func (c *wsClient) rest() []wsEvent {
	var out []wsEvent
	for {
		e, ok := c.next(5 * time.Second)
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

// serverFrames are the fixture's server->client frames.
func serverFrames(rec *recording) []wsEvent {
	var out []wsEvent
	for _, f := range rec.Frames {
		switch {
		case f.Dir != "server->client":
		case f.Type == "close":
			out = append(out, wsEvent{close: true, code: f.CloseCode, reason: f.CloseReason})
		default:
			out = append(out, wsEvent{text: f.Text})
		}
	}
	return out
}

// assertFrames compares frame sequences. Leading data frames are compared
// as a multiset: stdout and stderr can arrive in either order (README
// surprise 9); everything after them must match exactly and in order.
func assertFrames(t *testing.T, got, want []wsEvent) {
	t.Helper()
	split := func(evs []wsEvent) ([]string, []string) {
		var data, rest []string
		for i, e := range evs {
			if !e.close && strings.Contains(e.text, `"data"`) {
				data = append(data, e.String())
				continue
			}
			for _, r := range evs[i:] {
				rest = append(rest, r.String())
			}
			break
		}
		sort.Strings(data)
		return data, rest
	}
	gd, gr := split(got)
	wd, wr := split(want)
	if strings.Join(gd, "\n") != strings.Join(wd, "\n") || strings.Join(gr, "\n") != strings.Join(wr, "\n") {
		t.Errorf("frames differ from the recording\n got: %q\nwant: %q", append(gd, gr...), append(wd, wr...))
	}
}

// execCluster is the recorded node with the recorded raw_exec job running.
func execCluster(t *testing.T) (*Server, string, *api.Client, *api.Allocation) {
	t.Helper()
	s, url, c := newSim(t, recordingCluster)
	alloc := runningAlloc(t, c, rawExecJob("sandbox-rawexec", recNodeName))
	return s, url, c, alloc
}

func fixturePath(rec *recording, allocID string) string {
	return strings.Replace(rec.Request.Path, recAllocID, allocID, 1)
}

// TestExecFrameSequencesMatchRecordings replays the exec fixtures over a
// raw WebSocket and compares every server frame.
func TestExecFrameSequencesMatchRecordings(t *testing.T) {
	t.Parallel()
	stdinClose := `{"stdin":{"close":true}}`
	cases := []struct {
		fixture string
		client  func(c *wsClient) []wsEvent
	}{
		{"exec-echo-hi", func(c *wsClient) []wsEvent { c.send(stdinClose); return c.rest() }},
		{"exec-sh-exit3", func(c *wsClient) []wsEvent { c.send(stdinClose); return c.rest() }},
		{"exec-cat-stdin", func(c *wsClient) []wsEvent {
			c.send(`{"stdin":{"data":"YWJjCg=="}}`)
			first, _ := c.next(5 * time.Second)
			c.send(`{}`) // a heartbeat is ignored
			c.send(`{"tty_size":{"height":24,"width":80}}`)
			c.send(stdinClose)
			return append([]wsEvent{first}, c.rest()...)
		}},
		{"exec-command-not-found", func(c *wsClient) []wsEvent { return c.rest() }},
		{"exec-unknown-task", func(c *wsClient) []wsEvent {
			// The server may close first; then this write fails, harmlessly.
			_ = c.conn.WriteMessage(websocket.TextMessage, []byte(stdinClose))
			return c.rest()
		}},
		{"exec-unknown-alloc", func(c *wsClient) []wsEvent { return c.rest() }},
		{"exec-tty-echo-hi", func(c *wsClient) []wsEvent { return c.rest() }},
		{"exec-tty-echo-hi-stdin-closed-at-once", func(c *wsClient) []wsEvent { c.send(stdinClose); return c.rest() }},
		{"exec-echo-hi-stdin-left-open", func(c *wsClient) []wsEvent {
			var got []wsEvent
			for {
				e, ok := c.next(300 * time.Millisecond)
				if !ok {
					break // nothing terminal arrives while stdin stays open
				}
				got = append(got, e)
			}
			_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return append(got, c.rest()...)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			_, url, _, alloc := execCluster(t)
			rec := loadRecording(t, tc.fixture)
			ws := dialExec(t, url, fixturePath(rec, alloc.ID))
			if ws.resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d", ws.resp.StatusCode)
			}
			for _, h := range nomadHeaders {
				if ws.resp.Header.Get(h) != "" {
					t.Errorf("101 carries %s", h)
				}
			}
			assertFrames(t, tc.client(ws), serverFrames(rec))
		})
	}
}

func TestClosingTheSocketDoesNotStopTheCommandButStoppingTheJobDoes(t *testing.T) {
	t.Parallel()
	s, url, c, alloc := execCluster(t)
	rec := loadRecording(t, "exec-sleep-client-closes")
	ws := dialExec(t, url, fixturePath(rec, alloc.ID))
	if e, ok := ws.next(200 * time.Millisecond); ok {
		t.Fatalf("unexpected frame before the client closed: %v", e)
	}
	if s.RunningExecs() != 0 {
		t.Errorf("RunningExecs = %d while the socket is open", s.RunningExecs())
	}
	_ = ws.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	assertFrames(t, ws.rest(), serverFrames(rec))
	waitFor(t, "the orphaned sleep to be counted", func() bool { return s.RunningExecs() == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := s.RunningExecs(); n != 1 {
		t.Fatalf("RunningExecs = %d after the socket closed, want the sleep still running", n)
	}
	if _, _, err := c.Jobs().Deregister("sandbox-rawexec", true, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sleep to be killed", func() bool { return s.RunningExecs() == 0 })
}

func apiExec(t *testing.T, c *api.Client, alloc *api.Allocation, tty bool, stdin string, cmd ...string) (int, string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var in io.Reader = strings.NewReader(stdin)
	if tty {
		// A terminal user does not hang up at once (that would be exit 129,
		// exec-tty-echo-hi-stdin-closed-at-once.json): keep stdin open.
		pr, pw := io.Pipe()
		defer func() { _ = pw.Close() }()
		in = pr
	}
	code, err := c.Allocations().Exec(ctx, alloc, "main", tty, cmd, in, &stdout, &stderr, nil, nil)
	return code, stdout.String(), stderr.String(), err
}

func TestAPIExecReturnsExitCodesAndOutput(t *testing.T) {
	t.Parallel()
	s, _, c, alloc := execCluster(t)
	cases := []struct {
		name         string
		tty          bool
		stdin        string
		cmd          []string
		code         int
		stdout       string
		stderr       string
		errSubstring string
	}{
		{name: "echo exits 0", cmd: []string{"echo", "hi"}, stdout: "hi\n"},
		{name: "sh exit 3 with both streams", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, code: 3, stdout: "out\n", stderr: "err\n"},
		{name: "cat copies stdin", stdin: "abc\n", cmd: []string{"cat"}, stdout: "abc\n"},
		{name: "false exits 1", cmd: []string{"/bin/false"}, code: 1},
		{name: "tty merges streams and translates newlines", tty: true, cmd: []string{"sh", "-c", "echo a; echo b >&2"}, stdout: "a\r\nb\r\n"},
		{name: "timeout kills a long sleep with 124", cmd: []string{"timeout", "0.1", "sleep", "5"}, code: 124},
		{name: "an unknown command is an error, not an exit code", cmd: []string{"python3", "-c", "1"}, code: -2,
			errSubstring: `failed to start command: exec: "python3": executable file not found in $PATH`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr, err := apiExec(t, c, alloc, tc.tty, tc.stdin, tc.cmd...)
			if tc.errSubstring != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSubstring) {
					t.Fatalf("err = %v, want %q", err, tc.errSubstring)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
				t.Errorf("got %d %q %q, want %d %q %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	_ = s
}

func TestExecOnAStoppedAllocationIsRefused(t *testing.T) {
	t.Parallel()
	_, url, c, alloc := execCluster(t)
	done := make(chan int, 1)
	go func() {
		code, _, _, _ := apiExec(t, c, alloc, false, "", "sleep", "30")
		done <- code
	}()
	time.Sleep(100 * time.Millisecond)
	if _, _, err := c.Jobs().Deregister("sandbox-rawexec", false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitKilled {
			t.Errorf("killed exec exited %d, want %d", code, exitKilled)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exec of a stopped allocation did not end")
	}
	ws := dialExec(t, url, "/v1/client/allocation/"+alloc.ID+"/exec?task=main&tty=false&command=%5B%22echo%22%5D")
	got := ws.rest()
	want := []wsEvent{{close: true, code: websocket.ClosePolicyViolation, reason: `task "main" is not running.`}}
	assertFrames(t, got, want)
}

func TestExecOfAPendingAllocationSaysNotStarted(t *testing.T) {
	t.Parallel()
	_, url, c := newSim(t, recordingCluster, func(c *Config) { c.RunDelay = time.Hour })
	register(t, c, rawExecJob("slow", recNodeName))
	stubs, _, _ := c.Jobs().Allocations("slow", false, nil)
	ws := dialExec(t, url, "/v1/client/allocation/"+stubs[0].ID+"/exec?task=main&tty=false&command=%5B%22echo%22%5D")
	assertFrames(t, ws.rest(), []wsEvent{{close: true, code: websocket.ClosePolicyViolation, reason: `task "main" not started yet.`}})
	ws = dialExec(t, url, "/v1/client/allocation/"+stubs[0].ID+"/exec?task=main&tty=false&command=%5B%5D")
	assertFrames(t, ws.rest(), []wsEvent{{close: true, code: websocket.ClosePolicyViolation, reason: "command is not present"}})
	if r := do(t, "GET", url+"/v1/client/allocation/x/exec?command=notjson", nil); r.status != http.StatusInternalServerError {
		t.Errorf("bad command param: %d %s", r.status, r.body)
	}
}

func TestExecOutputIsChunked(t *testing.T) {
	t.Parallel()
	_, url, _, alloc := execCluster(t)
	ws := dialExec(t, url, "/v1/client/allocation/"+alloc.ID+"/exec?task=main&tty=false&command=%5B%22yes%22%5D")
	ws.send(`{"stdin":{"close":true}}`)
	total, frames := 0, 0
	var last []wsEvent
	for _, e := range ws.rest() {
		var f api.ExecStreamingOutput
		if !e.close && json.Unmarshal([]byte(e.text), &f) == nil && f.Stdout != nil && len(f.Stdout.Data) > 0 {
			if len(f.Stdout.Data) > execFrameSize {
				t.Fatalf("frame of %d bytes", len(f.Stdout.Data))
			}
			total += len(f.Stdout.Data)
			frames++
			continue
		}
		last = append(last, e)
	}
	if total != yesLimit || frames < yesLimit/execFrameSize {
		t.Errorf("yes wrote %d bytes in %d frames", total, frames)
	}
	assertFrames(t, last, []wsEvent{
		{text: `{"stderr":{"close":true}}`}, {text: `{"stdout":{"close":true}}`},
		{text: `{"exited":true,"result":{}}`}, {close: true, code: 1000},
	})
}

func TestStoppingTheAllocationEndsAFinishedSessionWaitingForStdin(t *testing.T) {
	t.Parallel()
	_, url, c, alloc := execCluster(t)
	ws := dialExec(t, url, "/v1/client/allocation/"+alloc.ID+"/exec?task=main&tty=false&command=%5B%22echo%22%2C%22hi%22%5D")
	if e, ok := ws.next(5 * time.Second); !ok || e.text != `{"stdout":{"data":"aGkK"}}` {
		t.Fatalf("first frame %v %v", e, ok)
	}
	if _, _, err := c.Jobs().Deregister("sandbox-rawexec", true, nil); err != nil {
		t.Fatal(err)
	}
	assertFrames(t, ws.rest(), []wsEvent{
		{text: `{"stderr":{"close":true}}`}, {text: `{"stdout":{"close":true}}`},
		{text: `{"exited":true,"result":{}}`}, {close: true, code: 1000},
	})
}
