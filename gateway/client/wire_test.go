package client

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sandgate/gateway/wire"
)

// Problem is an answer, not only the document (its Status is the HTTP
// status, RetryAfter the header), so it keeps its own declaration; it
// reads every member of the document the gateway writes, and no other.
func TestProblemReadsEveryMemberOfTheWireProblem(t *testing.T) {
	t.Parallel()
	members := func(typ reflect.Type) []string {
		var out []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "-" {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	got, want := members(reflect.TypeFor[Problem]()), members(reflect.TypeFor[wire.Problem]())
	if !slices.Equal(got, want) {
		t.Errorf("client.Problem reads %v; the gateway writes %v", got, want)
	}
	for f := range reflect.TypeFor[Problem]().Fields() {
		w, ok := reflect.TypeFor[wire.Problem]().FieldByName(f.Name)
		if ok && w.Type != f.Type {
			t.Errorf("%s is %s in client.Problem, %s in wire.Problem", f.Name, f.Type, w.Type)
		}
	}
}

// A sandbox answer carries the warn-mode violations first, as the
// gateway's serializer writes them; Sandbox reads them.
func TestASandboxReadsItsWarnings(t *testing.T) {
	t.Parallel()
	var s Sandbox
	body := `{"warnings":[{"rule":"N3","msg":"egress is open","mode":"warn"}],"id":"k7","state":"running","labels":{}}`
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if want := []Violation{{Rule: "N3", Msg: "egress is open", Mode: "warn"}}; s.ID != "k7" || !slices.Equal(s.Warnings, want) {
		t.Errorf("read %+v", s)
	}
	s.Labels = map[string]string{} // the remaining members as the gateway writes them
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), `{"warnings":[{"rule":"N3","msg":"egress is open","mode":"warn"}],"id":"k7",`) {
		t.Errorf("prints back as %s", out)
	}
}
