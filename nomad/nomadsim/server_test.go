package nomadsim

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestStartServesOnAListenerAndCloseStopsEverything(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	recordingCluster(&cfg)
	cfg.RunDelay = -1 // allocations run at once
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Start(ln)
	url := "http://" + ln.Addr().String()
	c := newClient(t, url)
	node, _, err := c.Nodes().Info(recNodeID, nil)
	if err != nil || node.HTTPAddr != ln.Addr().String() {
		t.Fatalf("node %v, %v", node, err)
	}
	alloc := runningAlloc(t, c, rawExecJob("sb", recNodeName))
	if code, out, _, err := apiExec(t, c, alloc, false, "", "echo", "via", "Start"); err != nil || code != 0 || out != "via Start\n" {
		t.Fatalf("exec: %d %q %v", code, out, err)
	}

	// A followed log stream and an exec'd sleep whose socket is gone.
	resp, err := http.Get(url + "/v1/client/fs/logs/" + alloc.ID + "?task=main&type=stdout&follow=true&plain=true")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	ws := dialExec(t, url, "/v1/client/allocation/"+alloc.ID+"/exec?task=main&tty=false&command=%5B%22sleep%22%2C%2260%22%5D")
	_ = ws.conn.Close()
	waitFor(t, "the orphaned sleep", func() bool { return s.RunningExecs() == 1 })

	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if n := s.RunningExecs(); n != 0 {
		t.Errorf("RunningExecs after Close = %d", n)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(body), taskStartedLine) {
		t.Errorf("followed log before Close: %q", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/regions", nil)
	if r, err := http.DefaultClient.Do(req); err == nil {
		_ = r.Body.Close()
		t.Error("server still answers after Close")
	}
}
