package isolation

import (
	"errors"
	"strings"
	"testing"
)

func TestTheDefaultConfigIsValid(t *testing.T) {
	t.Parallel()
	if err := DefaultConfig().validate(); err != nil {
		t.Fatal(err)
	}
	if err := overlayConfig().validate(); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidValuesAreRefusedNamingTheirFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		flag   string
		reason string
	}{
		{"a subnet that is not a CIDR", func(c *Config) { c.Subnet = "172.31.250.0" }, "--subnet", "not a CIDR"},
		{"a subnet given by a host address", func(c *Config) { c.Subnet = "172.31.250.7/24" }, "--subnet", "did you mean 172.31.250.0/24"},
		{"a subnet too small for a gateway and sandboxes", func(c *Config) { c.Subnet = "172.31.250.0/30" }, "--subnet", "prefix length 30"},
		{"an IPv6 subnet", func(c *Config) { c.Subnet = "fd00::/64" }, "--subnet", "not IPv4"},
		{"an overlay that is not a CIDR", func(c *Config) { c.Overlays = []string{"wg0"} }, "--overlay", "not a CIDR"},
		{"an overlay given twice", func(c *Config) { c.Overlays = []string{"10.8.0.0/24", "10.8.0.0/24"} }, "--overlay", "given twice"},
		{"overlapping overlays", func(c *Config) { c.Overlays = []string{"10.8.0.0/16", "10.8.4.0/24"} }, "--overlay", "overlaps 10.8.0.0/16"},
		{"an overlay overlapping the subnet", func(c *Config) { c.Overlays = []string{"172.31.0.0/16"} }, "--overlay", "overlaps --subnet"},
		{"a Nomad port out of range", func(c *Config) { c.NomadPorts = []int{4646, 4647, 65536} }, "--nomad-ports", "out of range"},
		{"a Nomad port of zero", func(c *Config) { c.NomadPorts = []int{0, 4647, 4648} }, "--nomad-ports", "out of range"},
		{"fewer than Nomad's three ports", func(c *Config) { c.NomadPorts = []int{4646} }, "--nomad-ports", "HTTP, RPC and Serf"},
		{"a Nomad port given twice", func(c *Config) { c.NomadPorts = []int{4646, 4647, 4647} }, "--nomad-ports", "given twice"},
		{"no SSH port", func(c *Config) { c.SSHPorts = nil }, "--ssh-ports", "at least one port"},
		{"an SSH port that is a Nomad port", func(c *Config) { c.SSHPorts = []int{4646} }, "--ssh-ports", "also one of --nomad-ports"},
		{"a bridge name over 15 characters", func(c *Config) { c.Bridge = "sandgate-egress-1" }, "--bridge", "not a Linux interface name"},
		{"a bridge name with a space", func(c *Config) { c.Bridge = "sand gate" }, "--bridge", "not a Linux interface name"},
		{"a bridge name with a shell character", func(c *Config) { c.Bridge = "eg$(id)" }, "--bridge", "not a Linux interface name"},
		{"a bridge name that reads as an option", func(c *Config) { c.Bridge = "-j" }, "--bridge", "not a Linux interface name"},
		{"an empty bridge name", func(c *Config) { c.Bridge = "" }, "--bridge", "not a Linux interface name"},
		{"a private resolver", func(c *Config) { c.Resolvers = []string{"192.168.1.1"} }, "--resolver", "inside 192.168.0.0/16"},
		{"a loopback resolver", func(c *Config) { c.Resolvers = []string{"127.0.0.53"} }, "--resolver", "inside 127.0.0.0/8"},
		{"a metadata resolver", func(c *Config) { c.Resolvers = []string{"169.254.169.253"} }, "--resolver", "inside 169.254.0.0/16"},
		{"a resolver inside an overlay", func(c *Config) {
			c.Overlays = []string{"203.0.113.0/24"}
			c.Resolvers = []string{"203.0.113.53"}
		}, "--resolver", "inside 203.0.113.0/24"},
		{"a resolver that is a name", func(c *Config) { c.Resolvers = []string{"dns.quad9.net"} }, "--resolver", "not an IPv4 address"},
		{"an IPv6 resolver", func(c *Config) { c.Resolvers = []string{"2606:4700:4700::1111"} }, "--resolver", "not an IPv4 address"},
		{"no resolver", func(c *Config) { c.Resolvers = nil }, "--resolver", "at least one"},
		{"a resolver given twice", func(c *Config) { c.Resolvers = []string{"1.1.1.1", "1.1.1.1"} }, "--resolver", "given twice"},
		{"a control-plane name with a slash", func(c *Config) { c.ControlPlaneNames = []string{"a/b"} }, "--control-plane-name", "not a node name"},
		{"a control-plane name given twice", func(c *Config) { c.ControlPlaneNames = []string{"cp1", "cp1"} }, "--control-plane-name", "given twice"},
		{"a relative Nomad config dir", func(c *Config) { c.NomadConfigDir = "etc/nomad.d" }, "--nomad-config-dir", "clean absolute path"},
		{"a Nomad config dir with a quote", func(c *Config) { c.NomadConfigDir = "/etc/nomad'd" }, "--nomad-config-dir", "clean absolute path"},
		{"a Nomad config dir that climbs", func(c *Config) { c.NomadConfigDir = "/etc/../root" }, "--nomad-config-dir", "clean absolute path"},
		{"control-plane meta without values", func(c *Config) { c.ControlPlaneMeta = map[string][]string{"node-role": nil} }, "ControlPlaneMeta", "no value"},
		{"control-plane meta with a space", func(c *Config) { c.ControlPlaneMeta = map[string][]string{"node-role": {"a b"}} }, "ControlPlaneMeta", "not a node meta value"},
		{"no dropped range", func(c *Config) { c.DropCIDRs = nil }, "DropCIDRs", "empty"},
		{"owning a Docker chain", func(c *Config) { c.Chain = "DOCKER-SANDGATE" }, "Chain", "not a chain"},
		{"owning a built-in chain", func(c *Config) { c.Chain = "forward" }, "Chain", "not a chain"},
		{"a chain name over 28 characters", func(c *Config) { c.Chain = strings.Repeat("S", 29) }, "Chain", "not a chain"},
		{"a comment tag with a space", func(c *Config) { c.CommentTag = "sandgate isolation" }, "CommentTag", "not a comment tag"},
		{"a version without its v", func(c *Config) { c.Version = "1" }, "Version", "not a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tc.edit(&c)
			p, err := New(c)
			if p != nil || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig", p, err)
			}
			var fe *FlagError
			if !errors.As(err, &fe) || fe.Flag != tc.flag {
				t.Fatalf("error %q does not name %s first (FlagError %+v)", err, tc.flag, fe)
			}
			if !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q, want it to name %s and say %q", err, tc.flag, tc.reason)
			}
		})
	}
}

func TestEveryInvalidValueIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Bridge = "this-name-is-far-too-long"
	c.Subnet = "nonsense"
	c.SSHPorts = []int{-1}
	err := c.validate()
	for _, flag := range []string{"--bridge", "--subnet", "--ssh-ports"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("%q does not mention %s", err, flag)
		}
	}
}
