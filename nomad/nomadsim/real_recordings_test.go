package nomadsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// The real-*.json fixtures are the project's own recordings: test/e2e's
// recorder (TestRecordRealAgent, run with -record) drove a real Nomad
// v1.6.5 server and client pair with the Docker driver through the
// exchanges the gateway depends on, with the gateway's own job JSON, exec
// wrapper and log queries. The tests here run the same exchanges against
// the simulator, in the same order, and compare what the gateway relies on.
// Re-record with:
//
//	go test -count=1 ./test/e2e/ -run TestRecordRealAgent -record

// realNotes are the recorder's notes on a fixture.
type realNotes struct {
	JobID       string `json:"job_id"`
	AllocID     string `json:"alloc_id"`
	Node        string `json:"node"`
	Replacement string `json:"replacement_alloc_id"`
	Role        string `json:"role"`
}

type realRec struct {
	*recording
	name  string
	notes realNotes
}

func loadReal(t *testing.T, name string) *realRec {
	t.Helper()
	rec := loadRecording(t, name)
	b, err := os.ReadFile(filepath.Join("testdata", "recordings", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Notes realNotes `json:"notes"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return &realRec{recording: rec, name: name, notes: f.Notes}
}

// realCluster is the recorded pair's nodes: the shared client worker-1 and
// the recorder's own rec-lost, linux/amd64 with docker; tasks start with
// empty logs, as a docker task running sleep has them.
func realCluster(c *Config) {
	c.Nodes = []NodeConfig{{Name: "worker-1", Arch: "amd64"}, {Name: "rec-lost", Arch: "amd64"}}
	c.QuietTasks = true
}

// realReplay is one simulator that a recorded script is replayed against.
type realReplay struct {
	t   *testing.T
	s   *Server
	url string
	c   *api.Client
	ids map[string]string // recorded allocation and node IDs -> the simulator's
}

func newRealReplay(t *testing.T) *realReplay {
	t.Helper()
	s, url, c := newSim(t, realCluster)
	return &realReplay{t: t, s: s, url: url, c: c, ids: map[string]string{}}
}

// translate replaces the recorded IDs in s with the simulator's.
func (r *realReplay) translate(s string) string {
	for rec, sim := range r.ids {
		s = strings.ReplaceAll(s, rec, sim)
	}
	return s
}

// waitAlloc waits until the job has an allocation in status (other than
// the ones in skip) and maps the recorded ID to it.
func (r *realReplay) waitAlloc(recorded, jobID, status string, skip ...string) {
	r.t.Helper()
	waitFor(r.t, jobID+" "+status, func() bool {
		stubs, _, err := r.c.Jobs().Allocations(jobID, true, nil)
		if err != nil {
			return false
		}
		for _, st := range stubs {
			if st.ClientStatus == status && !slices.Contains(skip, st.ID) {
				r.ids[recorded] = st.ID
				return true
			}
		}
		return false
	})
}

// step replays one fixture and compares the answer: the kind of comparison
// follows from the request.
func (r *realReplay) step(name string) {
	r.t.Helper()
	rec := loadReal(r.t, name)
	path := r.translate(rec.Request.Path)
	switch {
	case strings.Contains(path, "/exec?"):
		r.checkExec(rec, path)
	case strings.HasPrefix(path, "/v1/client/fs/logs/"):
		r.checkLogs(rec, path)
	default:
		var body any
		if len(rec.Request.Body) > 0 && string(rec.Request.Body) != "null" {
			body = rec.Request.Body
		}
		got := do(r.t, rec.Request.Method, r.url+path, body)
		got.checkAgainst(r.t, rec.recording, name)
		r.checkBody(rec, path, got.body)
	}
}

// checkBody compares an HTTP body by what the gateway reads from it.
func (r *realReplay) checkBody(rec *realRec, path string, got []byte) {
	r.t.Helper()
	if rec.Status != http.StatusOK {
		if want := rec.raw(r.t); r.translate(want) != string(got) {
			r.t.Errorf("%s: body %q, recorded %q", rec.name, got, want)
		}
		return
	}
	var g, w any
	mustJSON(r.t, got, &g)
	mustJSON(r.t, rec.Body, &w)
	switch {
	case strings.HasPrefix(path, "/v1/allocation/"):
		r.checkAlloc(rec.name, g, w)
	case strings.HasSuffix(path, "/allocations"):
		r.checkAllocList(rec.name, g, w)
	case strings.HasSuffix(path, "/evaluations"):
		r.checkEvals(rec.name, g, w)
	case strings.HasPrefix(path, "/v1/node/"):
		r.checkNode(rec.name, g, w)
	case strings.HasPrefix(path, "/v1/job/"):
		gj, wj := g.(map[string]any), w.(map[string]any)
		sameValues(r.t, rec.name, gj, wj, "Status", "Stop", "Type", "Priority", "Datacenters", "NodePool", "Constraints", "Meta")
		sameKeys(r.t, rec.name, gj, wj, keyRules{})
	default: // register and purge responses
		sameKeys(r.t, rec.name, g, w, keyRules{})
	}
}

// checkAlloc compares an allocation: its statuses and descriptions, its
// links, the task states with their event Types, DisplayMessages and
// Details, and the key set (recursively).
func (r *realReplay) checkAlloc(what string, got, want any) {
	r.t.Helper()
	g, w := got.(map[string]any), want.(map[string]any)
	if node, _ := w["NodeID"].(string); node != "" {
		if id, err := r.s.NodeID(w["NodeName"].(string)); err == nil {
			r.ids[node] = id
		}
	}
	sameValues(r.t, what, g, w, "ClientStatus", "ClientDescription", "DesiredStatus", "DesiredDescription", "NodeName", "TaskGroup", "Name")
	for _, k := range []string{"NextAllocation", "PreviousAllocation"} {
		if wv, gv := r.translate(str(w[k])), str(g[k]); wv != gv {
			r.t.Errorf("%s: %s %q, recorded %q", what, k, gv, wv)
		}
	}
	r.checkTaskStates(what, g["TaskStates"], w["TaskStates"])
	sameKeys(r.t, what, g, w, allocKeyRules)
}

// allocKeyRules: a job snapshot's Config key order is the only thing that
// varies; nothing is skipped.
var allocKeyRules = keyRules{}

func (r *realReplay) checkTaskStates(what string, got, want any) {
	r.t.Helper()
	g, _ := got.(map[string]any)
	w, _ := want.(map[string]any)
	if !reflect.DeepEqual(sortedKeys(g), sortedKeys(w)) {
		r.t.Errorf("%s: tasks %v, recorded %v", what, sortedKeys(g), sortedKeys(w))
		return
	}
	for name, wts := range w {
		gs, ws := g[name].(map[string]any), wts.(map[string]any)
		sameValues(r.t, what+" task "+name, gs, ws, "State", "Failed", "Restarts")
		for _, k := range []string{"StartedAt", "FinishedAt"} {
			if (gs[k] == nil) != (ws[k] == nil) {
				r.t.Errorf("%s task %s: %s %v, recorded %v", what, name, k, gs[k], ws[k])
			}
		}
		if ge, we := events(gs), events(ws); !reflect.DeepEqual(ge, we) {
			r.t.Errorf("%s task %s: events differ\n got: %q\nwant: %q", what, name, ge, we)
		}
	}
}

// events lists a task state's events as "Type | DisplayMessage | Details".
func events(ts map[string]any) []string {
	var out []string
	list, _ := ts["Events"].([]any)
	for _, e := range list {
		m := e.(map[string]any)
		d, _ := json.Marshal(m["Details"])
		out = append(out, fmt.Sprintf("%v | %v | %s", m["Type"], m["DisplayMessage"], d))
	}
	return out
}

// checkAllocList pairs the listed allocations by (translated) ID.
func (r *realReplay) checkAllocList(what string, got, want any) {
	r.t.Helper()
	g, w := got.([]any), want.([]any)
	if len(g) != len(w) {
		r.t.Errorf("%s: %d allocations, recorded %d", what, len(g), len(w))
		return
	}
	byID := map[string]map[string]any{}
	for _, a := range g {
		m := a.(map[string]any)
		byID[m["ID"].(string)] = m
	}
	for _, a := range w {
		wm := a.(map[string]any)
		id := r.translate(wm["ID"].(string))
		gm := byID[id]
		if gm == nil {
			r.t.Errorf("%s: recorded allocation %s (%s here) not listed", what, wm["ID"], id)
			continue
		}
		sameValues(r.t, what, gm, wm, "ClientStatus", "ClientDescription", "DesiredStatus", "DesiredDescription", "NodeName", "JobType")
		for _, k := range []string{"NextAllocation", "PreviousAllocation", "FollowupEvalID"} {
			if wv, gv := r.translate(str(wm[k])), str(gm[k]); (wv == "") != (gv == "") {
				r.t.Errorf("%s: %s %q, recorded %q", what, k, gv, wv)
			}
		}
		r.checkTaskStates(what, gm["TaskStates"], wm["TaskStates"])
		sameKeys(r.t, what, gm, wm, keyRules{})
	}
}

// checkEvals compares the evaluation list as what triggered each and how
// it ended, and whether it failed to place and blocked.
func (r *realReplay) checkEvals(what string, got, want any) {
	r.t.Helper()
	summary := func(v any) []string {
		var out []string
		for _, e := range v.([]any) {
			m := e.(map[string]any)
			out = append(out, fmt.Sprintf("%v %v failed=%v blocked=%v", m["TriggeredBy"], m["Status"], m["FailedTGAllocs"] != nil, str(m["BlockedEval"]) != ""))
		}
		sort.Strings(out)
		return out
	}
	if g, w := summary(got), summary(want); !reflect.DeepEqual(g, w) {
		r.t.Errorf("%s: evaluations differ\n got: %q\nwant: %q", what, g, w)
	}
}

// checkNode compares a node's status, eligibility and events, and its top
// level keys (the attributes are the simulator's, not the machine's).
func (r *realReplay) checkNode(what string, got, want any) {
	r.t.Helper()
	g, w := got.(map[string]any), want.(map[string]any)
	sameValues(r.t, what, g, w, "Name", "Status", "StatusDescription", "SchedulingEligibility", "Drain", "NodePool")
	msgs := func(n map[string]any) []string {
		var out []string
		list, _ := n["Events"].([]any)
		for _, e := range list {
			m := e.(map[string]any)
			out = append(out, fmt.Sprintf("%v: %v", m["Subsystem"], m["Message"]))
		}
		return out
	}
	if gm, wm := msgs(g), msgs(w); !reflect.DeepEqual(gm, wm) {
		r.t.Errorf("%s: node events %q, recorded %q", what, gm, wm)
	}
	sameKeys(r.t, what, g, w, keyRules{shallow: true})
}

// checkExec sends the recorded client frames and compares what the
// gateway reads: the stdout and stderr bytes, then every frame that is not
// data, in order (stream closes, the exit code, the close code and reason).
func (r *realReplay) checkExec(rec *realRec, path string) {
	r.t.Helper()
	r.compareExec(rec, r.startExec(rec, path).rest())
}

// startExec dials the exec WebSocket and sends the recorded client frames.
func (r *realReplay) startExec(rec *realRec, path string) *wsClient {
	r.t.Helper()
	c := dialExec(r.t, r.url, path)
	for _, f := range rec.Frames {
		if f.Dir == "client->server" && f.Type == "text" {
			_ = c.conn.WriteMessage(websocket.TextMessage, []byte(f.Text)) // the server may have closed first
		}
	}
	return c
}

func (r *realReplay) compareExec(rec *realRec, got []wsEvent) {
	r.t.Helper()
	gOut, gErr, gRest := splitExec(got)
	wOut, wErr, wRest := splitExec(serverFrames(rec.recording))
	if gOut != wOut || gErr != wErr {
		r.t.Errorf("%s: stdout %q stderr %q, recorded %q %q", rec.name, gOut, gErr, wOut, wErr)
	}
	if !slices.Equal(gRest, wRest) {
		r.t.Errorf("%s: frames differ\n got: %q\nwant: %q", rec.name, gRest, wRest)
	}
}

// splitExec decodes the data frames and lists the others.
func splitExec(evs []wsEvent) (stdout, stderr string, rest []string) {
	var o, e bytes.Buffer
	for _, ev := range evs {
		var m struct {
			Stdout, Stderr *struct {
				Data []byte `json:"data"`
			}
		}
		if !ev.close && json.Unmarshal([]byte(ev.text), &m) == nil && (m.Stdout != nil && m.Stdout.Data != nil || m.Stderr != nil && m.Stderr.Data != nil) {
			if m.Stdout != nil {
				o.Write(m.Stdout.Data)
			}
			if m.Stderr != nil {
				e.Write(m.Stderr.Data)
			}
			continue
		}
		rest = append(rest, ev.String())
	}
	return o.String(), e.String(), rest
}

// checkLogs compares status, Content-Type and the exact body: the frames
// with their Data, File and Offset, or the plain bytes.
func (r *realReplay) checkLogs(rec *realRec, path string) {
	r.t.Helper()
	got := do(r.t, http.MethodGet, r.url+path, nil)
	got.checkAgainst(r.t, rec.recording, rec.name)
	if want := r.translate(rec.raw(r.t)); string(got.body) != want {
		r.t.Errorf("%s: body %q, recorded %q", rec.name, got.body, want)
	}
}

// appendLogs writes into the simulator's task logs what the recorder wrote
// into the real task's, read back from the recordings of the full logs.
func (r *realReplay) appendLogs(recAlloc string) {
	r.t.Helper()
	stdout := loadReal(r.t, "real-logs-stdout-start-plain").raw(r.t)
	var frame struct{ Data []byte }
	mustJSON(r.t, []byte(loadReal(r.t, "real-logs-stderr-framed").raw(r.t)), &frame)
	must(r.t, r.s.AppendTaskLog(r.ids[recAlloc], "stdout", []byte(stdout)))
	must(r.t, r.s.AppendTaskLog(r.ids[recAlloc], "stderr", frame.Data))
}

// keyRules tune sameKeys: shallow compares the top level only.
type keyRules struct{ shallow bool }

// sameKeys checks that got has the recorded key set, recursively through
// objects (and the first element of arrays of objects), and that values
// present in both have the same JSON kind (null matches anything).
func sameKeys(t *testing.T, what string, got, want any, rules keyRules) {
	t.Helper()
	var diffs []string
	var walk func(path string, g, w any, depth int)
	walk = func(path string, g, w any, depth int) {
		if g == nil || w == nil {
			return
		}
		if gk, wk := jsonKind(g), jsonKind(w); gk != wk {
			diffs = append(diffs, fmt.Sprintf("%s: %s, recorded %s", path, gk, wk))
			return
		}
		if rules.shallow && depth > 0 {
			return
		}
		switch wv := w.(type) {
		case map[string]any:
			gv := g.(map[string]any)
			for _, k := range sortedKeys(wv) {
				if _, ok := gv[k]; !ok {
					diffs = append(diffs, fmt.Sprintf("%s.%s: missing", path, k))
					continue
				}
				walk(path+"."+k, gv[k], wv[k], depth+1)
			}
			for _, k := range sortedKeys(gv) {
				if _, ok := wv[k]; !ok {
					diffs = append(diffs, fmt.Sprintf("%s.%s: not recorded", path, k))
				}
			}
		case []any:
			gv := g.([]any)
			if len(gv) > 0 && len(wv) > 0 {
				walk(path+"[0]", gv[0], wv[0], depth+1)
			}
		}
	}
	walk("$", got, want, 0)
	if len(diffs) > 0 {
		t.Errorf("%s: keys differ from the recording:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

// sameValues checks that the named keys have equal values.
func sameValues(t *testing.T, what string, got, want map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s: %s = %v, recorded %v", what, k, got[k], want[k])
		}
	}
}

func str(v any) string { s, _ := v.(string); return s }

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %.200s: %v", b, err)
	}
}
