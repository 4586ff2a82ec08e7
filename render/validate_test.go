package render

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestJobRejectsAnInvalidSpecNamingTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		mutate    func(*SandboxSpec)
		wantField string
	}{
		{"an id with upper case is refused", func(s *SandboxSpec) { s.ID = "K7x2m9p4q8r5t1v6" }, "id"},
		{"an id shorter than eight characters is refused", func(s *SandboxSpec) { s.ID = "abc1234" }, "id"},
		{"an id longer than 32 characters is refused", func(s *SandboxSpec) { s.ID = strings.Repeat("a", 33) }, "id"},
		{"an id with a dash is refused", func(s *SandboxSpec) { s.ID = "abcd-1234" }, "id"},
		{"an empty prefix is refused", func(s *SandboxSpec) { s.Prefix = "" }, "prefix"},
		{"a prefix not ending with a dash is refused", func(s *SandboxSpec) { s.Prefix = "sandgate-sbx" }, "prefix"},
		{"a prefix with upper case is refused", func(s *SandboxSpec) { s.Prefix = "Sandgate-" }, "prefix"},
		{"a prefix with a dot is refused", func(s *SandboxSpec) { s.Prefix = "sandgate.sbx-" }, "prefix"},
		{"an empty node is refused", func(s *SandboxSpec) { s.Node = "" }, "node"},
		{"a node with a space is refused", func(s *SandboxSpec) { s.Node = "w 1" }, "node"},
		{"a node with a newline is refused", func(s *SandboxSpec) { s.Node = "w1\n" }, "node"},
		{"a node that is an interpolation is refused", func(s *SandboxSpec) { s.Node = "${node.unique.name}" }, "node"},
		{"a node with invalid utf-8 is refused", func(s *SandboxSpec) { s.Node = "w\xff1" }, "node"},
		{"an empty os is refused", func(s *SandboxSpec) { s.OS = "" }, "os"},
		{"an empty arch is refused", func(s *SandboxSpec) { s.Arch = "" }, "arch"},
		{"an unknown profile is refused", func(s *SandboxSpec) { s.Profile = "privileged" }, "profile"},
		{"an empty profile is refused", func(s *SandboxSpec) { s.Profile = "" }, "profile"},
		{"an unknown network is refused", func(s *SandboxSpec) { s.Network = "host" }, "network"},
		{"a zero lifetime ceiling is refused", func(s *SandboxSpec) { s.LifetimeCeiling = 0 }, "lifetime_ceiling"},
		{"a negative lifetime ceiling is refused", func(s *SandboxSpec) { s.LifetimeCeiling = -time.Hour }, "lifetime_ceiling"},
		{"a fractional-second lifetime ceiling is refused",
			func(s *SandboxSpec) { s.LifetimeCeiling = 4*time.Hour + time.Millisecond }, "lifetime_ceiling"},
		{"a ttl under one minute is refused", func(s *SandboxSpec) { s.TTL = 59 * time.Second }, "ttl"},
		{"a ttl past the ceiling is refused", func(s *SandboxSpec) { s.TTL = 4*time.Hour + time.Second }, "ttl"},
		{"a zero creation time is refused", func(s *SandboxSpec) { s.CreatedAt = time.Time{} }, "created_at"},
		{"a creation time before 1970 is refused", func(s *SandboxSpec) { s.CreatedAt = time.Unix(-1, 0) }, "created_at"},
		{"a creation time whose ceiling overflows is refused",
			func(s *SandboxSpec) { s.CreatedAt = time.Unix(1<<63-100, 0) }, "created_at"},
		{"zero cpu is refused", func(s *SandboxSpec) { s.CPUMHz = 0 }, "cpu_mhz"},
		{"negative cpu is refused", func(s *SandboxSpec) { s.CPUMHz = -1 }, "cpu_mhz"},
		{"zero memory is refused", func(s *SandboxSpec) { s.MemoryMB = 0 }, "memory_mb"},
		{"an empty image is refused", func(s *SandboxSpec) { s.Image = "" }, "image"},
		{"an image with whitespace is refused", func(s *SandboxSpec) { s.Image = "ubuntu 24.04" }, "image"},
		{"an image with an interpolation is refused", func(s *SandboxSpec) { s.Image = "${meta.image}" }, "image"},
		{"priority zero is refused", func(s *SandboxSpec) { s.Priority = 0 }, "priority"},
		{"priority above 100 is refused", func(s *SandboxSpec) { s.Priority = 101 }, "priority"},
		{"a zero workspace tmpfs is refused", func(s *SandboxSpec) { s.WorkspaceMB = 0 }, "workspace_mb"},
		{"a workspace tmpfs overflowing bytes is refused", func(s *SandboxSpec) { s.WorkspaceMB = 1 << 62 }, "workspace_mb"},
		{"a zero tmp tmpfs is refused", func(s *SandboxSpec) { s.TmpMB = 0 }, "tmp_mb"},
		{"a zero pids limit is refused", func(s *SandboxSpec) { s.PidsLimit = 0 }, "pids_limit"},
		{"a nofile soft limit above its hard limit is refused",
			func(s *SandboxSpec) { s.Ulimits.NoFile = Ulimit{Soft: 2048, Hard: 1024} }, "ulimits"},
		{"a zero nproc hard limit is refused",
			func(s *SandboxSpec) { s.Ulimits.NProc = Ulimit{Soft: 0, Hard: 0} }, "ulimits"},
		{"a negative nofile soft limit is refused",
			func(s *SandboxSpec) { s.Ulimits.NoFile.Soft = -1 }, "ulimits"},
		{"an empty runtime is refused", func(s *SandboxSpec) { s.Runtime = "" }, "runtime"},
		{"no ephemeral disk is refused", func(s *SandboxSpec) { s.DiskMB = 0 }, "disk_mb"},
		{"an ephemeral disk no larger than the log storage is refused", func(s *SandboxSpec) { s.DiskMB = 10 }, "disk_mb"},
		{"a runtime with a tab is refused", func(s *SandboxSpec) { s.Runtime = "run\tc" }, "runtime"},
		{"the first invalid field in declaration order is the one reported",
			func(s *SandboxSpec) { s.Runtime, s.CPUMHz, s.Node = "", 0, "" }, "node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := validSpec(ProfileWorkspace, NetworkEgress)
			tc.mutate(&spec)
			job, err := newRenderer(t).Job(spec)
			if job != nil {
				t.Errorf("Job returned a job alongside error %v", err)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("err = %v, want one wrapping ErrInvalidSpec", err)
			}
			fe, ok := errorsAsField(err)
			if !ok {
				t.Fatalf("err = %v (%T), want a *FieldError", err, err)
			}
			if fe.Field != tc.wantField {
				t.Errorf("Field = %q (%v), want %q", fe.Field, err, tc.wantField)
			}
			if want := `render: invalid spec: field "` + tc.wantField + `": `; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
			}
		})
	}
}

func TestJobAcceptsBoundaryValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*SandboxSpec)
	}{
		{"a ttl of exactly one minute is accepted", func(s *SandboxSpec) { s.TTL = time.Minute }},
		{"a ttl equal to the ceiling is accepted", func(s *SandboxSpec) { s.TTL = s.LifetimeCeiling }},
		{"an id of exactly 8 characters is accepted", func(s *SandboxSpec) { s.ID = "abcd1234" }},
		{"an id of exactly 32 characters is accepted", func(s *SandboxSpec) { s.ID = strings.Repeat("z", 32) }},
		{"priority 1 is accepted", func(s *SandboxSpec) { s.Priority = 1 }},
		{"priority 100 is accepted", func(s *SandboxSpec) { s.Priority = 100 }},
		{"a soft ulimit below its hard limit is accepted",
			func(s *SandboxSpec) { s.Ulimits.NoFile = Ulimit{Soft: 512, Hard: 4096} }},
		{"a sub-second creation time is accepted", func(s *SandboxSpec) { s.CreatedAt = createdAt.Add(999 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := validSpec(ProfileStrict, NetworkNone)
			tc.mutate(&spec)
			if _, err := newRenderer(t).Job(spec); err != nil {
				t.Errorf("Job: %v", err)
			}
		})
	}
}

func TestNewRejectsAnUnusableConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"no profiles", func(c *Config) { c.Profiles = nil }},
		{"a profile adding ALL capabilities", func(c *Config) {
			c.Profiles[ProfileWorkspace] = ProfileConfig{CapAdd: []string{"ALL"}}
		}},
		{"a profile adding a lower-case capability", func(c *Config) {
			c.Profiles[ProfileWorkspace] = ProfileConfig{CapAdd: []string{"chown"}}
		}},
		{"an empty profile name", func(c *Config) { c.Profiles[""] = ProfileConfig{} }},
		{"no network modes", func(c *Config) { c.NetworkModes = map[Network]string{} }},
		{"host networking", func(c *Config) { c.NetworkModes[NetworkEgress] = "host" }},
		{"another container's network", func(c *Config) { c.NetworkModes[NetworkNone] = "container:db" }},
		{"an empty network mode", func(c *Config) { c.NetworkModes[NetworkNone] = "" }},
		{"an empty network name", func(c *Config) { c.NetworkModes[""] = "none" }},
		{"resolvers for an unknown network", func(c *Config) { c.DNSServers["vpn"] = []string{"1.1.1.1"} }},
		{"a resolver that is not an address", func(c *Config) { c.DNSServers[NetworkEgress] = []string{"dns.google"} }},
		{"an IPv6 resolver", func(c *Config) { c.DNSServers[NetworkEgress] = []string{"2606:4700::1111"} }},
		{"an empty namespace", func(c *Config) { c.Namespace = "" }},
		{"an empty node pool", func(c *Config) { c.NodePool = "" }},
		{"an empty group name", func(c *Config) { c.GroupName = "" }},
		{"a task name with a space", func(c *Config) { c.TaskName = "sand box" }},
		{"no datacenters", func(c *Config) { c.Datacenters = nil }},
		{"an empty datacenter", func(c *Config) { c.Datacenters = []string{"dc1", ""} }},
		{"a zero kill timeout", func(c *Config) { c.KillTimeout = 0 }},
		{"zero log files", func(c *Config) { c.LogMaxFiles = 0 }},
		{"a zero log file size", func(c *Config) { c.LogMaxFileSizeMB = 0 }},
	} {
		t.Run("New refuses "+tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			r, err := New(cfg)
			if r != nil || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New = %v, %v; want nil and an error wrapping ErrInvalidConfig", r, err)
			}
		})
	}
}
