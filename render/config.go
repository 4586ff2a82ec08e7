package render

import (
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ProfileConfig is what a hardening profile changes in the container.
type ProfileConfig struct {
	// CapAdd lists the Linux capabilities added back after cap_drop ["ALL"],
	// without the CAP_ prefix (e.g. "CHOWN"). Empty means none, and the job
	// then carries no cap_add key at all. "ALL" is refused.
	CapAdd []string
	// ReadonlyRootfs makes the container's root filesystem read-only.
	ReadonlyRootfs bool
}

// Config is the deployment-wide part of every rendered job. Build it with
// DefaultConfig and override fields; New validates it.
type Config struct {
	// Profiles maps each known profile to its settings; a spec whose Profile
	// is not a key is invalid.
	Profiles map[Profile]ProfileConfig
	// NetworkModes maps each known network to the docker network_mode it
	// renders to ("none" -> "none", "egress" -> "sandgate-egress"). "host"
	// and "container:..." are refused.
	NetworkModes map[Network]string
	// DNSServers maps a network to the resolvers its containers use
	// (docker dns_servers): the public resolvers the host isolation bundle
	// lets through for egress. A network without an entry renders none.
	DNSServers map[Network][]string
	// Namespace is the Nomad namespace of every sandbox job.
	Namespace string
	// Datacenters lists the datacenters a sandbox may be placed in (["*"]).
	Datacenters []string
	// NodePool is the Nomad node pool of every sandbox job.
	NodePool string
	// GroupName is the name of the job's single task group.
	GroupName string
	// TaskName is the name of the group's single task.
	TaskName string
	// KillTimeout is how long Nomad waits after SIGTERM before killing the task.
	KillTimeout time.Duration
	// LogMaxFiles is how many rotated log files Nomad keeps per stream.
	LogMaxFiles int
	// LogMaxFileSizeMB is the size of each log file in MB.
	LogMaxFileSizeMB int
}

// workspaceCaps are the capabilities the workspace profile is granted (rule H1).
var workspaceCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETFCAP"}

// WorkspaceCapabilities returns the capabilities granted to the
// workspace profile (docs/policies.md, "The escape audit"): the most any sandbox
// may have. The escape audit holds every profile of a bundle's data to
// them.
func WorkspaceCapabilities() []string { return slices.Clone(workspaceCaps) }

// DefaultConfig returns the default values (docs/policies.md, "The job
// sandgate renders"): strict (read-only root, no capabilities) and
// workspace (writable root, eight capabilities) profiles;
// networks none -> "none" and egress -> "sandgate-egress"; namespace
// "default", datacenters ["*"], node pool "default", group and task
// "sandbox", a 5 s kill timeout and 2 log files of 5 MB.
func DefaultConfig() Config {
	return Config{
		Profiles: map[Profile]ProfileConfig{
			ProfileStrict:    {CapAdd: nil, ReadonlyRootfs: true},
			ProfileWorkspace: {CapAdd: slices.Clone(workspaceCaps), ReadonlyRootfs: false},
		},
		NetworkModes: map[Network]string{
			NetworkNone:   "none",
			NetworkEgress: "sandgate-egress",
		},
		DNSServers: map[Network][]string{
			NetworkEgress: {"1.1.1.1", "9.9.9.9"},
		},
		Namespace:        "default",
		Datacenters:      []string{"*"},
		NodePool:         "default",
		GroupName:        "sandbox",
		TaskName:         "sandbox",
		KillTimeout:      5 * time.Second,
		LogMaxFiles:      2,
		LogMaxFileSizeMB: 5,
	}
}

// capPattern matches a capability name without its CAP_ prefix.
var capPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// validate reports the first unusable setting as an error wrapping
// ErrInvalidConfig.
func (c Config) validate() error {
	if len(c.Profiles) == 0 {
		return configErr("profiles: must not be empty")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		if name == "" {
			return configErr("profiles: empty profile name")
		}
		for _, capName := range c.Profiles[name].CapAdd {
			if !capPattern.MatchString(capName) || capName == "ALL" {
				return configErr("profiles[%q]: cap_add %q is not a single capability name", name, capName)
			}
		}
	}
	if len(c.NetworkModes) == 0 {
		return configErr("network_modes: must not be empty")
	}
	for _, name := range slices.Sorted(maps.Keys(c.NetworkModes)) {
		mode := c.NetworkModes[name]
		switch {
		case name == "":
			return configErr("network_modes: empty network name")
		case reasonIfNotToken(mode) != "":
			return configErr("network_modes[%q]: %s", name, reasonIfNotToken(mode))
		case mode == "host" || strings.HasPrefix(mode, "container:"):
			return configErr("network_modes[%q]: %q shares another network namespace", name, mode)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.DNSServers)) {
		if _, ok := c.NetworkModes[name]; !ok {
			return configErr("dns_servers[%q]: not a known network", name)
		}
		for _, ip := range c.DNSServers[name] {
			if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
				return configErr("dns_servers[%q]: %q is not an IPv4 address", name, ip)
			}
		}
	}
	for _, f := range []struct{ name, value string }{
		{"namespace", c.Namespace}, {"node_pool", c.NodePool},
		{"group_name", c.GroupName}, {"task_name", c.TaskName},
	} {
		if reason := reasonIfNotToken(f.value); reason != "" {
			return configErr("%s: %s", f.name, reason)
		}
	}
	if len(c.Datacenters) == 0 {
		return configErr("datacenters: must not be empty")
	}
	for _, dc := range c.Datacenters {
		if reason := reasonIfNotToken(dc); reason != "" {
			return configErr("datacenters: %s", reason)
		}
	}
	if c.KillTimeout <= 0 {
		return configErr("kill_timeout: must be positive")
	}
	if c.LogMaxFiles <= 0 {
		return configErr("log_max_files: must be positive")
	}
	if c.LogMaxFileSizeMB <= 0 {
		return configErr("log_max_file_size_mb: must be positive")
	}
	return nil
}

// clone returns a deep copy of c.
func (c Config) clone() Config {
	out := c
	out.Profiles = make(map[Profile]ProfileConfig, len(c.Profiles))
	for name, p := range c.Profiles {
		p.CapAdd = slices.Clone(p.CapAdd)
		out.Profiles[name] = p
	}
	out.NetworkModes = maps.Clone(c.NetworkModes)
	out.Datacenters = slices.Clone(c.Datacenters)
	return out
}
