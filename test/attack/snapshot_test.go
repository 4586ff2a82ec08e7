package attack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/store"
)

// snapshot is a normalized view of everything a request could change:
// the store's sandbox, token and node records and the budget in use, and
// the simulator's jobs and nodes. Everything is sorted; two snapshots of
// an unchanged world are equal.
//
// One field is left out on purpose: a token record's last_used, which
// authentication legitimately updates (at most once a minute) on every
// accepted token, attacks included. Nothing else may move: a sandbox's
// updated_at, expiry, state, token digest; a token's revoked_at; a node's
// state, enrollment and budget; a Nomad job or a node's drain and
// eligibility.
type snapshot struct {
	Sandboxes []store.Sandbox `json:"sandboxes"`
	Tokens    []store.Token   `json:"tokens"`
	Nodes     []store.Node    `json:"nodes"`
	Usage     map[string]store.Usage
	Jobs      []string `json:"jobs"`
	// NomadJobs is "<id> stop=<bool>" per job the client lists.
	NomadJobs []string `json:"nomad_jobs"`
	// NomadNodes is "<name> <status> <eligibility> drain=<bool>".
	NomadNodes []string `json:"nomad_nodes"`
}

// snap reads the world. It makes Nomad calls (job and node listings): take
// it outside the window in which a case counts the simulator's requests.
func (w *world) snap(t testing.TB) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	var err error
	s.Sandboxes = w.records(t)
	slices.SortFunc(s.Sandboxes, func(a, b store.Sandbox) int { return strings.Compare(a.ID, b.ID) })
	if s.Tokens, err = w.st.ListTokens(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range s.Tokens {
		s.Tokens[i].LastUsed = time.Time{}
	}
	slices.SortFunc(s.Tokens, func(a, b store.Token) int { return strings.Compare(a.JTI, b.JTI) })
	if s.Nodes, err = w.st.ListNodes(ctx); err != nil {
		t.Fatal(err)
	}
	s.Usage = map[string]store.Usage{}
	for _, n := range []string{"worker-1", "worker-2", "control-1"} {
		if s.Usage[n], err = w.st.NodeUsage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	s.Jobs = w.sim.Jobs()
	s.NomadJobs, s.NomadNodes = w.nomadView(t)
	return s
}

// nomadView is Nomad's jobs and nodes as the gateway's client lists them.
// It is read again only when the simulator has served a request since the
// last reading (its own listings excepted): nothing else changes them.
func (w *world) nomadView(t testing.TB) (jobs, nodes []string) {
	t.Helper()
	if v := w.nomad; v != nil && v.requests == w.sim.Requests() {
		return slices.Clone(v.jobs), slices.Clone(v.nodes)
	}
	ctx := context.Background()
	js, err := w.nc.ListJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		jobs = append(jobs, j.ID+" stop="+boolString(j.Stop))
	}
	slices.Sort(jobs)
	ns, err := w.nc.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		nodes = append(nodes, n.Name+" "+n.Status+" "+n.Eligibility+" drain="+boolString(n.Drain))
	}
	slices.Sort(nodes)
	w.nomad = &nomadView{requests: w.sim.Requests(), jobs: jobs, nodes: nodes}
	return slices.Clone(jobs), slices.Clone(nodes)
}

// nomadView is a cached reading of Nomad's jobs and nodes.
type nomadView struct {
	requests    int64 // the simulator's request count right after the reading
	jobs, nodes []string
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// diff describes how b differs from a, or "" when they are equal.
func (a snapshot) diff(b snapshot) string {
	if reflect.DeepEqual(a, b) {
		return ""
	}
	ja, jb := a.lines(), b.lines()
	var out []string
	for _, l := range ja {
		if !slices.Contains(jb, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range jb {
		if !slices.Contains(ja, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// lines is the snapshot as one JSON line per record, for diff.
func (a snapshot) lines() []string {
	var out []string
	add := func(kind string, v any) {
		data, _ := json.Marshal(v)
		out = append(out, kind+" "+string(data))
	}
	for _, r := range a.Sandboxes {
		sum := sha256.Sum256(r.Spec) // the rendered job is long: compared by digest
		r.Spec = []byte(hex.EncodeToString(sum[:]))
		add("sandbox", r)
	}
	for _, t := range a.Tokens {
		add("token", t)
	}
	for _, n := range a.Nodes {
		add("node", n)
	}
	for _, n := range []string{"worker-1", "worker-2", "control-1"} {
		add("usage "+n, a.Usage[n])
	}
	add("jobs", a.Jobs)
	add("nomad jobs", a.NomadJobs)
	add("nomad nodes", a.NomadNodes)
	return out
}
