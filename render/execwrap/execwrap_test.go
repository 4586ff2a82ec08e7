package execwrap_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/render/execwrap"
)

func TestArgsCarryTheCallersValuesAsParametersNeverInTheScript(t *testing.T) {
	c := execwrap.Command{
		Argv:    []string{"sh", "-c", `echo "$X"; $(rm -rf /)`},
		Env:     map[string]string{"B": "two words", "A": `a'b"c$d`, "PATH": "/workspace"},
		Workdir: "/work space", Timeout: 7*time.Second + 900*time.Millisecond, KillAfter: 5 * time.Second,
	}
	got := c.Args()
	want := []string{execwrap.Shell, "-c", execwrap.Script, execwrap.Name, "7", "5", "/work space", "3",
		`A=a'b"c$d`, "B=two words", "PATH=/workspace", "sh", "-c", `echo "$X"; $(rm -rf /)`}
	if !slices.Equal(got, want) {
		t.Fatalf("Args:\n got %q\nwant %q", got, want)
	}
	for _, v := range append(slices.Collect(func(yield func(string) bool) {
		for _, v := range c.Env {
			if !yield(v) {
				return
			}
		}
	}), c.Argv...) {
		if strings.Contains(execwrap.Script, v) && len(v) > 2 {
			t.Errorf("the script contains the caller's value %q", v)
		}
	}
	back, ok, err := execwrap.Parse(got)
	if !ok || err != nil {
		t.Fatalf("Parse: ok %v, err %v", ok, err)
	}
	c.Timeout = 7 * time.Second
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("Parse(Args) = %+v, want %+v", back, c)
	}
}

func TestTimeoutsBelowASecondRoundUpToOne(t *testing.T) {
	got := execwrap.Command{Argv: []string{"true"}}.Args()
	if got[4] != "1" || got[5] != "1" || got[6] != "" || got[7] != "0" {
		t.Fatalf("%q", got[4:8])
	}
}

func TestParseRecognisesOnlyTheWrapper(t *testing.T) {
	good := execwrap.Command{Argv: []string{"true"}, Timeout: time.Second}.Args()
	for name, argv := range map[string][]string{
		"another command":     {"sh", "-c", "exit 3"},
		"too short":           good[:7],
		"another script":      append([]string{execwrap.Shell, "-c", execwrap.Script + " "}, good[3:]...),
		"another interpreter": append([]string{"sh"}, good[1:]...),
		"another $0":          append(append([]string{}, good[:3]...), append([]string{"x"}, good[4:]...)...),
	} {
		if _, ok, _ := execwrap.Parse(argv); ok {
			t.Errorf("%s: recognised as the wrapper", name)
		}
	}
	for name, argv := range map[string][]string{
		"a timeout that is no count":    replace(good, 4, "-1"),
		"more env pairs than arguments": replace(good, 7, "5"),
		"an env pair without =":         append(replace(good, 7, "1")[:8], "NOEQUALS", "true"),
	} {
		if _, ok, err := execwrap.Parse(argv); !ok || err == nil {
			t.Errorf("%s: ok %v err %v, want the wrapper with an error", name, ok, err)
		}
	}
}

func replace(argv []string, i int, v string) []string {
	out := slices.Clone(argv)
	out[i] = v
	return out
}
