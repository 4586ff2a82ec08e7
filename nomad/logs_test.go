package nomad

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

const logsPath = "/v1/client/fs/logs/" + recAllocID

func TestLogsAsksForTheTail(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("logs-stdout-end-offset5-framed")
	got, err := r.client().Logs(context.Background(), recAllocID, recTaskName, "stdout", 5)
	if err != nil || string(got) != "-out\n" {
		t.Fatalf("Logs = %q, %v; want %q", got, err, "-out\n")
	}
	q := r.requests()[0].Query
	want := map[string]string{"task": "main", "type": "stdout", "origin": "end", "offset": "5", "plain": "false", "follow": "false"}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("query %s = %q, want %q", k, q.Get(k), v)
		}
	}
}

func TestLogsNeverReturnsMoreThanTheTail(t *testing.T) {
	t.Parallel()
	frames := loadFixture(t, "logs-stdout-start-framed").body() // "hello-out\n" in one frame
	stderr := loadFixture(t, "logs-stderr-start-framed").body() // "hello-err\n"
	tests := []struct {
		name string
		body string
		tail int64
		want string
	}{
		{"a server that ignores the offset is cut to the tail", string(frames), 4, "out\n"},
		{"a tail longer than the log returns all of it", string(frames), 1000, "hello-out\n"},
		{"a tail of exactly the log returns all of it", string(frames), 10, "hello-out\n"},
		{"frames back to back, with heartbeats, keep their last bytes",
			string(frames) + "{}" + string(stderr) + "{}", 13, "ut\nhello-err\n"},
		{"an empty stream is an empty log", "", 10, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newReplay(t)
			r.handle("GET", logsPath, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body))
			})
			got, err := r.client().Logs(context.Background(), recAllocID, "main", "stdout", tt.tail)
			if err != nil || string(got) != tt.want || int64(len(got)) > tt.tail {
				t.Fatalf("Logs = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLogsOfStderr(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("logs-stderr-start-framed")
	got, err := r.client().Logs(context.Background(), recAllocID, "main", "stderr", 100)
	if err != nil || string(got) != "hello-err\n" || r.requests()[0].Query.Get("type") != "stderr" {
		t.Fatalf("Logs = %q, %v", got, err)
	}
}

func TestLogsErrors(t *testing.T) {
	t.Parallel()
	r := newReplay(t)
	r.serve("error-logs-unknown-alloc")
	r.handle("GET", logsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"Data":"aGVsbG8t`)) // the connection dies mid-frame
	})
	c := r.client()
	ctx := context.Background()
	_, err := c.Logs(ctx, unknownID, "main", "stdout", 10)
	var e *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || !strings.Contains(e.Msg, "Unknown allocation") {
		t.Fatalf("Logs(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := c.Logs(ctx, recAllocID, "main", "stdout", 10); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Logs(truncated) = %v, want ErrUnavailable", err)
	}
	for _, bad := range []struct {
		stream string
		tail   int64
	}{{"stdin", 10}, {"stdout", 0}, {"stdout", -1}} {
		if _, err := c.Logs(ctx, recAllocID, "main", bad.stream, bad.tail); err == nil {
			t.Fatalf("Logs(%q, %d) succeeded", bad.stream, bad.tail)
		}
	}
	if n := len(r.requests()); n != 2 {
		t.Fatalf("%d requests, want 2 (invalid arguments send none)", n)
	}
}
