package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/apitest"
	"sandgate/gateway/client"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
)

// failSafe bounds how long a test waits for the gateway to end a
// connection whose deadline is a fraction of a second: far above it, so a
// busy machine does not fail the test; a gateway without the deadline
// never ends the connection, and fails it.
const failSafe = 30 * time.Second

// shortDeadlines is a gateway on a loopback listener whose body and
// answer deadlines are read and write.
func shortDeadlines(t *testing.T, read, write time.Duration) *harness {
	t.Helper()
	return harnessOf(t, gatewaytest.New(t, gatewaytest.Options{Config: func(c *gateway.Config) {
		c.ReadTimeout, c.WriteTimeout = read, write
	}}))
}

// dial opens a TCP connection to the gateway.
func dial(t *testing.T, h *harness) net.Conn {
	t.Helper()
	u, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// answerAndEnd reads what the gateway sends on conn until it closes the
// connection, within failSafe: the answer, if one came first (ok false
// if the connection ended without one).
func answerAndEnd(t *testing.T, conn net.Conn) (r apitest.Reply, ok bool) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		if isTimeout(err) {
			t.Fatalf("the gateway neither answered nor closed the connection within %v", failSafe)
		}
		return apitest.Reply{}, false // closed (or reset) without an answer
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("the connection stayed open after the answer (%d %s): %v", resp.StatusCode, body, err)
	}
	return apitest.Reply{Status: resp.StatusCode, Header: resp.Header, Body: body}, true
}

// A request that announces a body and sends none is answered, or its
// connection closed, once the read deadline passes, with or without a
// token: before, POST /healthz with Content-Length 10 held its connection
// for good. A route that reads its body answers 408 problem+json.
func TestABodyThatNeverComesEndsTheConnection(t *testing.T) {
	t.Parallel()
	h := shortDeadlines(t, 200*time.Millisecond, 0)
	agent := h.mint(token.RoleAgent, "silent")
	for _, tc := range []struct {
		name, request string
		want          int // 0: any answer, or none
	}{
		{"unauthenticated, to a route that takes no body", "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", 0},
		{"unauthenticated, to create", "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n", 0},
		{"authenticated, to create (which reads it)", "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + agent + "\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n", http.StatusRequestTimeout},
		{"authenticated, a chunked body that stops", "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + agent + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"ttl", http.StatusRequestTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := dial(t, h)
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			r, answered := answerAndEnd(t, conn)
			if tc.want == 0 {
				return
			}
			if !answered {
				t.Fatalf("closed without the %d answer", tc.want)
			}
			apitest.ExpectProblem(t, r, tc.want, "request_timeout")
			checkNoStore(t, "the 408", r)
		})
	}
	if n := len(h.sim.Jobs()); n != 0 {
		t.Fatalf("a create without its body reached Nomad: %d jobs", n)
	}
}

// A body trickled a byte at a time is cut at the read deadline with a 408,
// long before it would have been complete: before, the gateway waited for
// all of it.
func TestATrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	h := shortDeadlines(t, 200*time.Millisecond, 0)
	agent := h.mint(token.RoleAgent, "trickle")
	body := `{"labels":{"a":"` + strings.Repeat("b", 60) + `"}}`
	conn := dial(t, h)
	if _, err := fmt.Fprintf(conn, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", agent, len(body)); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := range len(body) {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	r, answered := answerAndEnd(t, conn)
	if !answered {
		t.Fatal("closed without an answer")
	}
	if n := sent.Load(); n >= int64(len(body)) {
		t.Fatalf("the gateway answered %d only once the whole body (%d bytes) had trickled in", r.Status, n)
	}
	apitest.ExpectProblem(t, r, http.StatusRequestTimeout, "request_timeout")
	if len(h.sim.Jobs()) != 0 {
		t.Fatal("the cut create reached Nomad")
	}
}

// steadyReader yields size bytes in chunks of chunk, one every pause: a
// client uploading at a steady, ordinary rate.
type steadyReader struct {
	left, chunk int
	pause       time.Duration
	started     bool
}

func (r *steadyReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if r.started {
		time.Sleep(r.pause) // the client's pace, not a wait for the gateway
	}
	r.started = true
	n := min(len(p), r.chunk, r.left)
	for i := range n {
		p[i] = byte('a' + i%26)
	}
	r.left -= n
	return n, nil
}

// A large file upload that keeps sending is not cut, though it lasts
// several read timeouts: every 64 KiB that arrives starts the count again.
func TestASteadyFileUploadLongerThanTheReadTimeoutIsNotCut(t *testing.T) {
	t.Parallel()
	const readTimeout = 300 * time.Millisecond
	h := shortDeadlines(t, readTimeout, 0)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	const size = 2 << 20
	body := &steadyReader{left: size, chunk: 32 << 10, pause: 15 * time.Millisecond}
	req, err := http.NewRequest(http.MethodPut, h.url+"/v1/sandboxes/"+id+"/files?path=/workspace/big.bin", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+session)
	req.Header.Set("Content-Type", "application/octet-stream")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), fmt.Sprintf(`"size":%d`, size)) {
		t.Fatalf("the upload: %d %s", resp.StatusCode, got)
	}
	if took < 2*readTimeout {
		t.Fatalf("the upload took %v, not longer than the read timeout: it proves nothing", took)
	}
	t.Logf("a %d-byte upload over %v with a read timeout of %v", size, took, readTimeout)
}

// A streamed exec, and a JSON exec, that outlast the read and write
// timeouts are not cut: the body was read, so no read deadline is left,
// and each event is a write with its own deadline.
func TestExecsLongerThanTheTimeoutsAreNotCut(t *testing.T) {
	t.Parallel()
	h := shortDeadlines(t, 200*time.Millisecond, 300*time.Millisecond)
	id, session := h.gw.Create(h.operator, nil).IDToken()
	c, err := client.New(client.Config{Addr: h.url, Token: session})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var events []client.ExecEvent
	for ev, err := range c.ExecStream(ctx, id, client.ExecRequest{Argv: []string{"sh", "-c", "echo a; sleep 1; echo b"}}) {
		if err != nil {
			t.Fatalf("the stream failed after %d events: %v", len(events), err)
		}
		events = append(events, ev)
	}
	last := checkSequence(t, events)
	if last.Event != client.EventExit || output(events, client.EventStdout) != "a\nb\n" {
		t.Fatalf("the stream: %+v", events)
	}
	r := h.gw.Do(http.MethodPost, "/v1/sandboxes/"+id+"/exec", session, map[string]any{"argv": []string{"sleep", "1"}})
	if r.Status != http.StatusOK || r.JSON(t)["exit_code"] != float64(0) {
		t.Fatalf("the JSON exec: %d %s", r.Status, r.Body)
	}
}

// A client that stops reading its answer is cut at the write deadline:
// the handler ends (its request is counted in the metrics) and the
// connection closes before the whole file was sent.
func TestAClientThatStopsReadingIsCut(t *testing.T) {
	t.Parallel()
	// Small socket buffers on both sides, so that a file of a few MiB
	// cannot vanish into them.
	h := harnessOf(t, gatewaytest.New(t, gatewaytest.Options{
		Config: func(c *gateway.Config) { c.WriteTimeout = 300 * time.Millisecond },
		HTTPServer: func(s *http.Server) {
			s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetWriteBuffer(8 << 10)
				}
				return ctx
			}
		},
	}))
	t0 := time.Now()
	id, session := h.gw.Create(h.operator, nil).IDToken()
	const size = 2 << 20
	defer func() { t.Logf("took %v", time.Since(t0)) }()
	if r := h.gw.Do(http.MethodPut, "/v1/sandboxes/"+id+"/files?path=/workspace/big.bin", session, bytes.Repeat([]byte("z"), size)); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	t.Logf("created and written after %v", time.Since(t0))
	conn := dial(t, h)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10) // a small window: the gateway's writes block soon
	}
	if _, err := fmt.Fprintf(conn, "GET /v1/sandboxes/%s/files?path=/workspace/big.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", id, session); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing until the gateway has finished the request.
	done := func() bool {
		m := h.gw.Do(http.MethodGet, "/metrics", "", nil)
		for _, line := range strings.Split(string(m.Body), "\n") {
			if strings.HasPrefix(line, "sandgate_http_request_duration_seconds_count{") && strings.Contains(line, `method="GET"`) && strings.Contains(line, `route="/v1/sandboxes/:id/files"`) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(failSafe); !done(); {
		if time.Now().After(deadline) {
			t.Fatalf("the GET of a client that reads nothing was still being written after %v", failSafe)
		}
		time.Sleep(20 * time.Millisecond) // polling the metrics, not a tuned wait
	}
	t.Logf("the handler ended after %v", time.Since(t0))
	if err := conn.SetReadDeadline(time.Now().Add(failSafe)); err != nil {
		t.Fatal(err)
	}
	got, _ := io.Copy(io.Discard, conn)
	if got >= size {
		t.Fatalf("the client received %d bytes, the whole file: it was not cut", got)
	}
}
