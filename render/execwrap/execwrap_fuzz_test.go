package execwrap_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"sandgate/render/execwrap"
)

// FuzzCommandRoundTrip: whatever the caller sends (argv, env values,
// workdir; env names never hold '=', the gateway allows only
// [A-Za-z_][A-Za-z0-9_]*) stays a positional parameter of the fixed
// script, and Parse reads back exactly the command, in whole seconds of
// at least one. Parse of any argv never panics, and what it accepts
// survives another round trip unchanged.
func FuzzCommandRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, argv, env, workdir string, timeout, killAfter int64) {
		c := execwrap.Command{Workdir: workdir, Timeout: time.Duration(timeout), KillAfter: time.Duration(killAfter)}
		if argv != "" {
			c.Argv = strings.Split(argv, "\n")
		}
		for kv := range strings.SplitSeq(env, "\n") {
			if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
				if c.Env == nil {
					c.Env = map[string]string{}
				}
				c.Env[name] = value
			}
		}
		args := c.Args()
		if len(args) != 8+len(c.Env)+len(c.Argv) || args[0] != execwrap.Shell || args[1] != "-c" ||
			args[2] != execwrap.Script || args[3] != execwrap.Name || args[6] != workdir {
			t.Fatalf("Args() = %q: the caller's values moved out of their positions", args)
		}
		if !slices.Equal(args[len(args)-len(c.Argv):], c.Argv) {
			t.Fatalf("Args() = %q does not end with the argv %q", args, c.Argv)
		}
		back, ok, err := execwrap.Parse(args)
		if !ok || err != nil {
			t.Fatalf("Parse(Args()) = ok %v, %v", ok, err)
		}
		whole := func(d time.Duration) time.Duration { return max(time.Second, d.Truncate(time.Second)) }
		if !slices.Equal(back.Argv, c.Argv) || !maps.Equal(back.Env, c.Env) || back.Workdir != c.Workdir ||
			back.Timeout != whole(c.Timeout) || back.KillAfter != whole(c.KillAfter) {
			t.Fatalf("Parse(Args(%+v)) = %+v", c, back)
		}

		// The other way round: any argv.
		other := append(append([]string{}, args[:4]...), strings.Split(argv, "\n")...)
		if got, ok, err := execwrap.Parse(other); ok && err == nil {
			again, ok2, err2 := execwrap.Parse(got.Args())
			if !ok2 || err2 != nil || !slices.Equal(again.Argv, got.Argv) || !maps.Equal(again.Env, got.Env) ||
				again.Workdir != got.Workdir || again.Timeout != whole(got.Timeout) || again.KillAfter != whole(got.KillAfter) {
				t.Fatalf("Parse(%q) = %+v does not survive a round trip: %+v", other, got, again)
			}
		}
	})
}
