package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The recorder's machinery: it sends one exchange to the real agent, keeps
// what the fixtures of the shared recordings keep (request, status, the four
// Nomad headers, body; exec and log frames) and writes it, scrubbed, as
// nomad/nomadsim/testdata/recordings/<name>.json. record_test.go holds the
// script.

// fixture is one exchange in the format of the shared recordings (README
// of nomad/nomadsim/testdata/recordings). Bodies stay raw JSON so the key
// order is the agent's.
type fixture struct {
	Request struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body"`
	} `json:"request"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	Frames  []any             `json:"frames,omitempty"`
	Close   any               `json:"close,omitempty"`
	Notes   map[string]any    `json:"notes,omitempty"`
}

// recordedHeaders are the headers a fixture keeps, when present.
var recordedHeaders = []string{"Content-Type", "X-Nomad-Index", "X-Nomad-KnownLeader", "X-Nomad-LastContact"}

// recorder writes fixtures for one run against the suite's server.
type recorder struct {
	t     *testing.T
	dir   string
	base  string // the server's http://127.0.0.1:PORT
	start time.Time
	names []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	dir := filepath.Join(suite.root, "nomad", "nomadsim", "testdata", "recordings")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return &recorder{t: t, dir: dir, base: suite.server.HTTPAddr, start: time.Now()}
}

// newScrubber replaces what differs between machines and runs but is not
// Nomad's data, as the shared recordings do: the hostname (<hostname>), the
// agents' data dirs (<data_dir>) and config files (<path>), the suite's
// directory (<suite_dir>), the loopback ports the suite picked
// (127.0.0.1:<port>) and the client interface's addresses (<ip>). IDs,
// indexes and times stay as recorded.
func newScrubber() func(string) string {
	var pairs []string
	agents := append([]*agent{suite.server}, suite.cluster.Clients()...)
	for _, a := range agents {
		pairs = append(pairs, filepath.Join(a.Dir, "data"), "<data_dir>", a.Config, "<path>")
	}
	pairs = append(pairs, suite.dir, "<suite_dir>")
	if ifc, err := net.InterfaceByName(suite.cluster.Interface); err == nil {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				pairs = append(pairs, ipn.IP.String(), "<ip>")
			}
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		// As a whole JSON string always; anywhere only when it is too long
		// to occur by chance.
		pairs = append(pairs, `"`+h+`"`, `"<hostname>"`)
		if len(h) >= 6 {
			pairs = append(pairs, h, "<hostname>")
		}
	}
	r := strings.NewReplacer(pairs...)
	port := regexp.MustCompile(`127\.0\.0\.1:[0-9]{2,5}\b`)
	return func(s string) string { return port.ReplaceAllString(r.Replace(s), "127.0.0.1:<port>") }
}

// rawJSON is b as a fixture body: the JSON itself, or {"raw": text}.
func rawJSON(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) > 0 && json.Valid(b) {
		return json.RawMessage(b)
	}
	return rawText(string(b))
}

func rawText(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"raw": s})
	return json.RawMessage(bytes.TrimSpace(buf.Bytes()))
}

// write scrubs and writes a fixture; an empty name records nothing.
func (r *recorder) write(name string, f *fixture) {
	r.t.Helper()
	if name == "" {
		return
	}
	if *recordOnly != "" && !regexp.MustCompile(*recordOnly).MatchString(name) {
		return
	}
	if len(f.Request.Body) == 0 {
		f.Request.Body = json.RawMessage("null")
	}
	if len(f.Body) == 0 {
		f.Body = json.RawMessage("null")
	}
	if f.Headers == nil {
		f.Headers = map[string]string{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		r.t.Fatalf("fixture %s: %v", name, err)
	}
	out := newScrubber()(buf.String()) // built each time: agents start during the run
	if !json.Valid([]byte(out)) {
		r.t.Fatalf("fixture %s: scrubbing broke the JSON", name)
	}
	if err := os.WriteFile(filepath.Join(r.dir, name+".json"), []byte(out), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.names = append(r.names, name)
}

// answer is what the script reads back from an exchange (unscrubbed).
type answer struct {
	status int
	body   []byte
	took   time.Duration
	err    error
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("status %d, error %v: %s", a.status, a.err, a.body)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

// recordClient is Go's default transport (Accept-Encoding: gzip), as the
// nomad/api client and the gateway use.
var recordClient = &http.Client{Transport: http.DefaultTransport}

// call records one HTTP exchange, bounded by bound. A request body is
// sent as is (it is already the gateway's JSON).
func (r *recorder) call(name, method, path string, body []byte, bound time.Duration, notes map[string]any) answer {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	start := time.Now()
	resp, err := recordClient.Do(req)
	f := &fixture{Notes: notes}
	f.Request.Method, f.Request.Path = method, path
	if body != nil {
		f.Request.Body = rawJSON(body)
	}
	if err != nil {
		took := time.Since(start)
		f.Notes = withNote(notes, "transport_error", err.Error(), "took_ms", took.Milliseconds())
		r.write(name, f)
		return answer{took: took, err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	data, rerr := io.ReadAll(resp.Body)
	took := time.Since(start)
	f.Status, f.Headers, f.Body = resp.StatusCode, keptHeaders(resp.Header), rawJSON(data)
	if rerr != nil {
		f.Notes = withNote(f.Notes, "read_error", rerr.Error())
	}
	r.write(name, f)
	return answer{status: resp.StatusCode, body: data, took: took, err: rerr}
}

func keptHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, k := range recordedHeaders {
		if v := h.Get(k); v != "" {
			out[k] = v
		}
	}
	return out
}

// withNote returns notes (a copy) with key/value pairs added.
func withNote(notes map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(notes)+len(kv)/2)
	for k, v := range notes {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// wsFrame is one entry of an exec fixture's frames.
type wsFrame struct {
	TMs         int64           `json:"t_ms"`
	Dir         string          `json:"dir,omitempty"`
	Type        string          `json:"type,omitempty"`
	Text        *string         `json:"text,omitempty"`
	JSON        json.RawMessage `json:"json,omitempty"`
	CloseCode   *int            `json:"close_code,omitempty"`
	CloseReason *string         `json:"close_reason,omitempty"`
	Note        string          `json:"note,omitempty"`
	Event       string          `json:"event,omitempty"`
	Error       string          `json:"error,omitempty"`
}

// execOutcome is what an exec stream said.
type execOutcome struct {
	status         int // 101 on upgrade
	stdout, stderr string
	exitCode       *int
	closeCode      int
	closeReason    string
	took           time.Duration
}

// exec records one exec WebSocket as the gateway's Nomad client speaks it:
// tty=false, the stdin chunks, then {"stdin":{"close":true}}, then reading
// until the server closes; a server close frame is echoed (RFC 6455). The
// whole exchange is bounded by bound: then the client closes with 1000.
func (r *recorder) exec(name, allocID, task string, argv []string, stdin string, bound time.Duration, notes map[string]any) execOutcome {
	r.t.Helper()
	cmd, _ := json.Marshal(argv)
	path := fmt.Sprintf("/v1/client/allocation/%s/exec?task=%s&tty=false&command=%s", allocID, url.QueryEscape(task), url.QueryEscape(string(cmd)))
	f := &fixture{Notes: withNote(notes, "command", argv, "tty", false)}
	f.Request.Method, f.Request.Path = http.MethodGet, path
	start := time.Now()
	ms := func() int64 { return time.Since(start).Milliseconds() }
	var frames []any
	out := execOutcome{}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	d := websocket.Dialer{HandshakeTimeout: bound}
	conn, resp, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(r.base, "http")+path, nil)
	if err != nil {
		out.took = time.Since(start)
		frames = append(frames, wsFrame{TMs: ms(), Event: "dial failed", Error: err.Error()})
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			out.status, f.Status, f.Headers, f.Body = resp.StatusCode, resp.StatusCode, keptHeaders(resp.Header), rawJSON(b)
		}
		f.Frames = frames
		f.Notes = withNote(f.Notes, "took_ms", out.took.Milliseconds(), "exit_code", nil)
		r.write(name, f)
		return out
	}
	defer func() { _ = conn.Close() }()
	_ = resp.Body.Close()
	out.status, f.Status, f.Headers = resp.StatusCode, resp.StatusCode, map[string]string{}
	send := func(v any) {
		b, _ := json.Marshal(v)
		s := string(b)
		frames = append(frames, wsFrame{TMs: ms(), Dir: "client->server", Type: "text", Text: &s, JSON: b})
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_ = conn.WriteMessage(websocket.TextMessage, b)
	}
	closed := false
	conn.SetCloseHandler(func(code int, text string) error {
		reason := text
		frames = append(frames, wsFrame{TMs: ms(), Dir: "server->client", Type: "close", CloseCode: &code, CloseReason: &reason})
		empty := ""
		echo := code
		frames = append(frames, wsFrame{TMs: ms(), Dir: "client->server", Type: "close", CloseCode: &echo, CloseReason: &empty,
			Note: "client echo of the server's close frame (RFC 6455 close handshake)"})
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
		out.closeCode, out.closeReason, closed = code, text, true
		return nil
	})
	for _, chunk := range splitStdin(stdin) {
		send(map[string]any{"stdin": map[string]any{"data": []byte(chunk)}})
	}
	send(map[string]any{"stdin": map[string]any{"close": true}})
	_ = conn.SetReadDeadline(start.Add(bound))
	var stdout, stderr strings.Builder
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			frames = append(frames, wsFrame{TMs: ms(), Event: "read loop ended", Error: err.Error()})
			var ne net.Error
			if !closed && errors.As(err, &ne) && ne.Timeout() {
				code, empty := websocket.CloseNormalClosure, ""
				frames = append(frames, wsFrame{TMs: ms(), Dir: "client->server", Type: "close", CloseCode: &code, CloseReason: &empty,
					Note: fmt.Sprintf("the recorder gave up after %s", bound)})
				_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
				f.Close = map[string]any{"initiator": "client (recorder timeout)", "code": code, "reason": ""}
			}
			break
		}
		s := string(msg)
		frames = append(frames, wsFrame{TMs: ms(), Dir: "server->client", Type: "text", Text: &s, JSON: rawJSON(msg)})
		var m struct {
			Stdout, Stderr *struct{ Data []byte }
			Exited         bool
			Result         *struct {
				ExitCode int `json:"exit_code"`
			}
		}
		if json.Unmarshal(msg, &m) == nil {
			if m.Stdout != nil {
				stdout.Write(m.Stdout.Data)
			}
			if m.Stderr != nil {
				stderr.Write(m.Stderr.Data)
			}
			if m.Exited && m.Result != nil {
				out.exitCode = &m.Result.ExitCode
			}
		}
	}
	out.took = time.Since(start)
	out.stdout, out.stderr = stdout.String(), stderr.String()
	if closed {
		f.Close = map[string]any{"initiator": "server", "code": out.closeCode, "reason": out.closeReason}
	}
	f.Frames = frames
	f.Notes = withNote(f.Notes, "decoded_stdout", out.stdout, "decoded_stderr", out.stderr, "exit_code", out.exitCode,
		"took_ms", out.took.Milliseconds())
	r.write(name, f)
	return out
}

// splitStdin cuts stdin into the gateway client's chunks (16 KiB).
func splitStdin(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 16<<10)
		out, s = append(out, s[:n]), s[n:]
	}
	return out
}

// logChunk is one read of a log stream body.
type logChunk struct {
	t    int64
	data []byte
}

// logs records one GET /v1/client/fs/logs/<alloc> with the parameters the
// gateway sends (url.Values order, as nomad/api encodes them), reading the
// body until EOF or bound.
func (r *recorder) logs(name, allocID string, params url.Values, bound time.Duration, notes map[string]any) answer {
	r.t.Helper()
	path := "/v1/client/fs/logs/" + allocID + "?" + params.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	f := &fixture{Notes: notes}
	f.Request.Method, f.Request.Path = http.MethodGet, path
	start := time.Now()
	resp, err := recordClient.Do(req)
	if err != nil {
		took := time.Since(start)
		f.Notes = withNote(notes, "transport_error", err.Error(), "took_ms", took.Milliseconds())
		r.write(name, f)
		return answer{took: took, err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	var chunks []logChunk
	var all []byte
	buf := make([]byte, 64<<10)
	endedBy := "server (EOF)"
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			chunks = append(chunks, logChunk{time.Since(start).Milliseconds(), append([]byte(nil), buf[:n]...)})
			all = append(all, buf[:n]...)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				endedBy = "client (" + err.Error() + ")"
			}
			break
		}
	}
	took := time.Since(start)
	f.Status, f.Headers = resp.StatusCode, keptHeaders(resp.Header)
	if resp.StatusCode != http.StatusOK {
		f.Body = rawJSON(all)
		f.Notes = withNote(f.Notes, "took_ms", took.Milliseconds())
		r.write(name, f)
		return answer{status: resp.StatusCode, body: all, took: took}
	}
	f.Body = rawText(string(all))
	f.Frames = []any{}
	if params.Get("plain") == "true" {
		for _, c := range chunks {
			f.Frames = append(f.Frames, map[string]any{"t_ms": c.t, "text": string(c.data)})
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(all))
		for {
			var obj json.RawMessage
			if err := dec.Decode(&obj); err != nil {
				break
			}
			end, at := dec.InputOffset(), int64(0)
			for _, c := range chunks {
				at = c.t
				if end -= int64(len(c.data)); end <= 0 {
					break
				}
			}
			f.Frames = append(f.Frames, map[string]any{"t_ms": at, "json": obj})
		}
	}
	f.Close = map[string]any{"ended_by": endedBy, "after_ms": took.Milliseconds()}
	f.Notes = withNote(f.Notes, "decoded", decodeFrames(all, params.Get("plain") == "true"))
	r.write(name, f)
	return answer{status: resp.StatusCode, body: all, took: took}
}

// decodeFrames is the log text a framed body carries.
func decodeFrames(body []byte, plain bool) string {
	if plain {
		return string(body)
	}
	var out []byte
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var fr struct{ Data string }
		if err := dec.Decode(&fr); err != nil {
			return string(out)
		}
		b, _ := base64.StdEncoding.DecodeString(fr.Data)
		out = append(out, b...)
	}
}
