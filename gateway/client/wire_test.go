package client

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

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
