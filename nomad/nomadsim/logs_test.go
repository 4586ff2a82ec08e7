package nomadsim

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// logCluster runs the recorded raw_exec job and gives its stderr the
// recorded content, so stderr log responses can be compared byte for byte.
// Its stdout is the simulator's start line followed by "hello-out\n".
func logCluster(t *testing.T) (*Server, string, *api.Client, *api.Allocation) {
	t.Helper()
	s, url, c, alloc := execCluster(t)
	must(t, s.AppendTaskLog(alloc.ID, "stdout", []byte("hello-out\n")))
	must(t, s.AppendTaskLog(alloc.ID, "stderr", []byte("hello-err\n")))
	return s, url, c, alloc
}

// expectedFramed rewrites a recorded framed body for our content: the same
// bytes with our Data and Offset.
func expectedFramed(t *testing.T, rec *recording, data string, offset int) string {
	t.Helper()
	var f streamFrame
	raw := rec.raw(t)
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(strings.Replace(raw,
		base64.StdEncoding.EncodeToString(f.Data), base64.StdEncoding.EncodeToString([]byte(data)), 1),
		fmt.Sprintf(`"Offset":%d`, f.Offset), fmt.Sprintf(`"Offset":%d`, offset), 1)
}

func TestLogResponsesMatchRecordings(t *testing.T) {
	t.Parallel()
	_, url, _, alloc := logCluster(t)
	stdout := taskStartedLine + "hello-out\n"
	cases := []struct {
		fixture string
		want    func(t *testing.T, rec *recording) string
	}{
		// stderr holds exactly the recorded bytes: identical responses.
		{"logs-stderr-start-framed", func(t *testing.T, rec *recording) string { return rec.raw(t) }},
		{"logs-stderr-start-plain", func(t *testing.T, rec *recording) string { return rec.raw(t) }},
		// origin=end&offset=5 is the last 5 bytes, "-out\n" as recorded,
		// with Offset at the end of our longer file.
		{"logs-stdout-end-offset5-plain", func(t *testing.T, rec *recording) string { return rec.raw(t) }},
		{"logs-stdout-end-offset5-framed", func(t *testing.T, rec *recording) string {
			return expectedFramed(t, rec, "-out\n", len(stdout))
		}},
		{"logs-stdout-start-plain", func(*testing.T, *recording) string { return stdout }},
		{"logs-stdout-start-plain-follow-false", func(*testing.T, *recording) string { return stdout }},
		{"logs-stdout-start-framed", func(t *testing.T, rec *recording) string {
			return expectedFramed(t, rec, stdout, len(stdout))
		}},
		{"logs-stdout-start-framed-follow-false", func(t *testing.T, rec *recording) string {
			return expectedFramed(t, rec, stdout, len(stdout))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			rec := loadRecording(t, tc.fixture)
			got := do(t, "GET", url+fixturePath(rec, alloc.ID), nil)
			got.checkAgainst(t, rec, tc.fixture)
			if want := tc.want(t, rec); string(got.body) != want {
				t.Errorf("body %q\nwant %q", got.body, want)
			}
		})
	}
}

func TestFollowedLogsStreamAppendsAndHeartbeats(t *testing.T) {
	t.Parallel()
	s, url, _, alloc := logCluster(t)
	rec := loadRecording(t, "logs-stdout-start-framed-follow-true")
	resp, err := http.Get(url + fixturePath(rec, alloc.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.Header.Get("Content-Type") != rec.Headers["Content-Type"] {
		t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	next := func() streamFrame {
		t.Helper()
		var f streamFrame
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("decode frame: %v", err)
		}
		return f
	}
	first := next()
	if want := taskStartedLine + "hello-out\n"; string(first.Data) != want || first.File != "alloc/logs/main.stdout.0" || first.Offset != int64(len(want)) {
		t.Fatalf("first frame %+v", first)
	}
	isHeartbeat := func(f streamFrame) bool {
		return len(f.Data) == 0 && f.File == "" && f.Offset == 0 && f.FileEvent == ""
	}
	if hb := next(); !isHeartbeat(hb) {
		t.Fatalf("expected a {} heartbeat, got %+v", hb)
	}
	must(t, s.AppendTaskLog(alloc.ID, "stdout", []byte("more\n")))
	for {
		f := next()
		if isHeartbeat(f) {
			continue
		}
		if string(f.Data) != "more\n" || f.Offset != first.Offset+5 {
			t.Fatalf("appended frame %+v", f)
		}
		break
	}
}

func TestAPILogsFollowAndEndWhenTheTaskStops(t *testing.T) {
	t.Parallel()
	_, _, c, alloc := logCluster(t)
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errs := c.AllocFS().Logs(alloc, true, "main", "stderr", "start", 0, cancel, nil)
	select {
	case f := <-frames:
		if string(f.Data) != "hello-err\n" || f.Offset != 10 {
			t.Fatalf("frame %+v", f)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("no frame")
	}
	if _, _, err := c.Jobs().Deregister("sandbox-rawexec", true, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-frames:
		if ok {
			t.Error("unexpected frame after the task stopped")
		}
	case err := <-errs:
		t.Fatalf("stream error %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("followed stream did not end when the task stopped")
	}
}

func TestLogParameterErrorsUseTheAgentsTexts(t *testing.T) {
	t.Parallel()
	_, url, _, alloc := logCluster(t)
	base := url + "/v1/client/fs/logs/" + alloc.ID
	cases := []struct {
		query  string
		status int
		body   string
	}{
		{"?type=stdout", 400, "must provide task name"},
		{"?task=main", 400, "must provide log type (stdout/stderr)"},
		{"?task=main&type=stdout&origin=middle", 400, "origin must be start or end"},
		{"?task=main&type=stdout&follow=maybe", 400, `failed to parse follow field to boolean: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{"?task=main&type=stdout&offset=x", 400, `error parsing offset: strconv.ParseInt: parsing "x": invalid syntax`},
		{"?task=nope&type=stdout", 404, `task group "g" does not have task with name "nope"`},
	}
	for _, tc := range cases {
		r := do(t, "GET", base+tc.query, nil)
		if r.status != tc.status || string(r.body) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.query, r.status, r.body, tc.status, tc.body)
		}
	}
	// offset beyond the end from the start gives nothing; from the end, all.
	if r := do(t, "GET", base+"?task=main&type=stderr&plain=true&offset=99", nil); string(r.body) != "" {
		t.Errorf("offset past the end: %q", r.body)
	}
	if r := do(t, "GET", base+"?task=main&type=stderr&plain=true&origin=end&offset=99", nil); string(r.body) != "hello-err\n" {
		t.Errorf("origin end, offset past the start: %q", r.body)
	}
}

func TestLogsOfAPendingTaskAndAppendErrors(t *testing.T) {
	t.Parallel()
	s, url, c := newSim(t, recordingCluster, func(c *Config) { c.RunDelay = time.Hour })
	register(t, c, rawExecJob("slow", recNodeName))
	stubs, _, _ := c.Jobs().Allocations("slow", false, nil)
	r := do(t, "GET", url+"/v1/client/fs/logs/"+stubs[0].ID+"?task=main&type=stdout", nil)
	if r.status != http.StatusNotFound || string(r.body) != `task "main" not started yet. No logs available` {
		t.Errorf("pending task logs: %d %q", r.status, r.body)
	}
	if err := s.AppendTaskLog("nope", "stdout", nil); err == nil {
		t.Error("append to unknown alloc accepted")
	}
	if err := s.AppendTaskLog(stubs[0].ID, "stdlog", nil); err == nil {
		t.Error("append to unknown stream accepted")
	}
}
