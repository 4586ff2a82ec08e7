package gateway

import (
	"encoding/json"
	"errors"
	"testing"
)

// The gateway's own workdir test only adds a refusal: a relative or
// NUL-holding workdir is a 400 naming workdir whatever the policy decided
// (under the shipped bundle E1 refuses both first), and a workdir E1
// allows passes it.
func TestExecCheckRefusesAWorkdirTheWrapperCannotCarry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		workdir string
		ok      bool
	}{
		{"/workspace/src", true}, {"/tmp", true},
		{"tmp", false}, {"", false}, {"/tmp\x00/etc", false},
	} {
		w := c.workdir
		err := (&execRequest{Argv: []string{"pwd"}, Workdir: &w}).check(nil)
		var p *Problem
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &p) || p.Field != "workdir")) {
			t.Errorf("workdir %q: check = %v, want ok %v (a 400 naming workdir otherwise)", c.workdir, err, c.ok)
		}
	}
}

// A create's body is digested with every member, null where it was left
// out: the shape the digests in the store were taken in, whatever the
// wire type leaves out when it is sent.
func TestTheCreateDigestKeepsItsShape(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(digestedCreate(createRequest{Profile: new("strict"), TTLSeconds: new(int64(0)), Labels: map[string]string{}}))
	want := `{"profile":"strict","network":null,"ttl_seconds":0,"node":null,"cpu_mhz":null,"memory_mb":null,"image":null,"labels":{},"wait_seconds":null,"reissue_token":null}`
	if err != nil || string(b) != want {
		t.Fatalf("%s %v", b, err)
	}
}
