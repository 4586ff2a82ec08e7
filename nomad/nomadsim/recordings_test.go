package nomadsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// recording is one fixture of testdata/recordings (see its README).
type recording struct {
	Request struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body"`
	} `json:"request"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	Frames  []recFrame        `json:"frames"`
	Close   *struct {
		Code      int    `json:"code"`
		Initiator string `json:"initiator"`
		Reason    string `json:"reason"`
	} `json:"close"`
}

type recFrame struct {
	Dir         string          `json:"dir"`
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	JSON        json.RawMessage `json:"json"`
	CloseCode   int             `json:"close_code"`
	CloseReason string          `json:"close_reason"`
	Note        string          `json:"note"`
	Event       string          `json:"event"`
}

func loadRecording(t *testing.T, name string) *recording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "recordings", name+".json"))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return &r
}

// raw is the exact body of a non-JSON fixture body ({"raw": ...}).
func (r *recording) raw(t *testing.T) string {
	t.Helper()
	var b struct {
		Raw *string `json:"raw"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Raw == nil {
		t.Fatalf("fixture body is not raw: %s", r.Body)
	}
	return *b.Raw
}

// object is a JSON object body; for an array body, its first element.
func (r *recording) object(t *testing.T) map[string]any {
	t.Helper()
	return firstObject(t, r.Body)
}

func firstObject(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if a, ok := v.([]any); ok {
		if len(a) == 0 {
			t.Fatalf("empty array body")
		}
		v = a[0]
	}
	o, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("body is not an object: %s", body)
	}
	return o
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// assertSameShape checks that got has the key set of want (except the keys
// named in stateDependent, which may be missing from got) and that values
// present in both have the same JSON kind (null matches anything).
func assertSameShape(t *testing.T, what string, got, want map[string]any, stateDependent ...string) {
	t.Helper()
	optional := map[string]bool{}
	for _, k := range stateDependent {
		optional[k] = true
	}
	var missing, extra, kinds []string
	for k, wv := range want {
		gv, ok := got[k]
		if !ok {
			if !optional[k] {
				missing = append(missing, k)
			}
			continue
		}
		if gk, wk := jsonKind(gv), jsonKind(wv); gk != wk && gk != "null" && wk != "null" {
			kinds = append(kinds, fmt.Sprintf("%s: got %s, recorded %s", k, gk, wk))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && !optional[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(kinds)
	if len(missing)+len(extra)+len(kinds) > 0 {
		t.Errorf("%s: shape differs from the recording:\n  missing keys: %v\n  extra keys: %v\n  kinds: %v", what, missing, extra, kinds)
	}
}

// nomadHeaders are the headers the fixtures record.
var nomadHeaders = []string{"Content-Type", "X-Nomad-Index", "X-Nomad-KnownLeader", "X-Nomad-LastContact"}

// assertSameHeaders checks presence of each recorded header kind and the
// values that are not indexes.
func assertSameHeaders(t *testing.T, what string, got http.Header, want map[string]string) {
	t.Helper()
	for _, h := range nomadHeaders {
		wv, wok := want[h]
		gv := got.Get(h)
		gok := gv != ""
		switch {
		case wok != gok:
			t.Errorf("%s: header %s: got %q (present %v), recorded %q (present %v)", what, h, gv, gok, wv, wok)
		case wok && h != "X-Nomad-Index" && gv != wv:
			t.Errorf("%s: header %s: got %q, recorded %q", what, h, gv, wv)
		}
	}
}

// response is a raw HTTP exchange with the simulator.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request like the nomad/api client does (Go's default
// transport, so Accept-Encoding: gzip) unless hdr overrides headers.
func do(t *testing.T, method, url string, body any, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// checkAgainst compares status, headers and (for error fixtures) the exact
// body text with a recording.
func (r response) checkAgainst(t *testing.T, rec *recording, what string) {
	t.Helper()
	if r.status != rec.Status {
		t.Errorf("%s: status %d, recorded %d (body %q)", what, r.status, rec.Status, r.body)
	}
	assertSameHeaders(t, what, r.header, rec.Headers)
}

func newClient(t *testing.T, url string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newSim starts a simulator with a short RunDelay for tests.
func newSim(t *testing.T, mutate ...func(*Config)) (*Server, string, *api.Client) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RunDelay = 10 * time.Millisecond
	cfg.LogHeartbeat = 50 * time.Millisecond
	for _, m := range mutate {
		m(&cfg)
	}
	s, url := NewTestServer(t, cfg)
	return s, url, newClient(t, url)
}

// sandboxJob is a docker job pinned to one node by ${node.unique.name}, like
// the recorded sandbox-docker job.
func sandboxJob(id, node string) *api.Job {
	job := api.NewServiceJob(id, id, "global", 10)
	job.Datacenters = []string{"dc1"}
	job.Constrain(api.NewConstraint("${attr.kernel.name}", "=", "linux"))
	job.Constrain(api.NewConstraint("${attr.cpu.arch}", "=", "arm64"))
	job.Constrain(api.NewConstraint("${node.unique.name}", "=", node))
	task := api.NewTask("sandbox", "docker").
		SetConfig("image", "ubuntu:24.04").
		SetConfig("command", "sleep").
		SetConfig("args", []string{"14400"}).
		Require(&api.Resources{CPU: new(500), MemoryMB: new(256)})
	tg := api.NewTaskGroup("sandbox", 1).AddTask(task)
	job.AddTaskGroup(tg)
	return job
}

func register(t *testing.T, c *api.Client, job *api.Job) *api.JobRegisterResponse {
	t.Helper()
	resp, _, err := c.Jobs().Register(job, nil)
	if err != nil {
		t.Fatalf("register %s: %v", *job.ID, err)
	}
	return resp
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runningAlloc registers job and returns its allocation once running.
func runningAlloc(t *testing.T, c *api.Client, job *api.Job) *api.Allocation {
	t.Helper()
	register(t, c, job)
	var alloc *api.Allocation
	waitFor(t, "a running allocation", func() bool {
		stubs, _, err := c.Jobs().Allocations(*job.ID, false, nil)
		if err != nil || len(stubs) == 0 || stubs[0].ClientStatus != "running" {
			return false
		}
		alloc, _, err = c.Allocations().Info(stubs[0].ID, nil)
		return err == nil
	})
	return alloc
}
