package isolation

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// FuzzConfig feeds arbitrary flag values to New: it never panics; a refused
// config is a *FlagError wrapping ErrInvalidConfig; an accepted one renders
// a script that holds exactly one ensure_rule line per rule (no value could
// break out of its line or its quotes) and shows no value unquoted.
func FuzzConfig(f *testing.F) {
	f.Add("sandgate-egress", "172.31.250.0/24", "10.8.0.0/24", "1.1.1.1", "cp-1", "/etc/nomad.d", 4646, 22)
	f.Add("eg$(id)", "10.0.0.1/24", "fd00::/8", "127.0.0.1", "a'b", "/x/../y", 70000, 0)
	f.Add("br0", "192.168.0.0/16", "", "9.9.9.9", "", "/", 1, 65535)
	f.Add("a\nb", "1.2.3.0/24\n", "1.2.4.0/24 ", " 8.8.8.8", "-rf", "/etc/nomad.d\n", 4647, 4647)
	ensureLine := regexp.MustCompile(`(?m)^\tensure_rule `)
	f.Fuzz(func(t *testing.T, bridge, subnet, overlay, resolver, name, dir string, port, ssh int) {
		c := DefaultConfig()
		c.Bridge, c.Subnet, c.NomadConfigDir = bridge, subnet, dir
		if overlay != "" {
			c.Overlays = []string{overlay}
		}
		c.Resolvers = []string{resolver}
		if name != "" {
			c.ControlPlaneNames = []string{name}
		}
		c.NomadPorts = []int{port, 4647, 4648}
		c.SSHPorts = []int{ssh}
		p, script, err := Render(c)
		if err != nil {
			var fe *FlagError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &fe) || !strings.HasPrefix(fe.Flag, "-") {
				t.Fatalf("refusal %v is not a FlagError naming a flag", err)
			}
			return
		}
		if n := len(ensureLine.FindAll(script, -1)); n != len(p.Rules) {
			t.Fatalf("%d ensure_rule lines for %d rules:\n%s", n, len(p.Rules), script)
		}
		for _, v := range []string{bridge, dir, name} {
			if v != "" && strings.ContainsAny(v, "'\"$`\\ \n;&|<>(){}") {
				t.Fatalf("accepted a value that needs shell quoting: %q", v)
			}
		}
	})
}
