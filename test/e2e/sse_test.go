package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandgate/gateway/apitest"
)

// sseEvent is one Server-Sent Event of a streaming exec, as it came off
// the wire, and when it arrived.
type sseEvent struct {
	id    string
	event string
	data  string
	at    time.Time
}

func (e sseEvent) String() string { return e.id + " " + e.event + " " + e.data }

// terminal reports an exit or error event.
func (e sseEvent) terminal() bool { return e.event == "exit" || e.event == "error" }

// code is an error event's code ("" for any other event).
func (e sseEvent) code() string {
	if e.event != "error" {
		return ""
	}
	var m struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal([]byte(e.data), &m)
	return m.Code
}

// streamExec is POST .../exec with Accept: text/event-stream, read off the
// wire rather than through client.ExecStream (which stops at the first
// terminal event): it returns every event the gateway wrote and when the
// gateway closed the stream, so a test sees anything after a terminal
// event, and a stream that never closes fails at ctx's end. onEvent, when
// not nil, sees each event as it arrives.
func (g *gw) streamExec(ctx context.Context, t testing.TB, sb apitest.Created, body map[string]any, onEvent func(sseEvent)) (events []sseEvent, closed time.Time) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v1/sandboxes/"+sb.ID+"/exec", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sb.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := streamClient.Do(req)
	if err != nil {
		t.Fatalf("streaming exec: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var rest bytes.Buffer
		_, _ = rest.ReadFrom(resp.Body)
		t.Fatalf("streaming exec: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), rest.Bytes())
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		if line == "" { // the end of an event
			if ev.event != "" {
				ev.at = time.Now()
				events = append(events, ev)
				if onEvent != nil {
					onEvent(ev)
				}
			}
			ev = sseEvent{}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			ev.data += value
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("streaming exec: reading the stream: %v (events so far %v)", err, events)
	}
	return events, time.Now()
}

// streamClient has no overall timeout: a stream lasts as long as its
// command, and its caller's ctx bounds it.
var streamClient = &http.Client{}
