package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Settings is the part of the bundle's data (data.sandgate.config) that Go
// code needs for defaults: the renderer's values, the gateway's limits. The
// policy stays the judge; these only pick values it will then check.
type Settings struct {
	Prefix            string            `json:"prefix"`             // job id prefix, e.g. "sandgate-sbx-"
	SandboxIDPattern  string            `json:"sandbox_id_pattern"` // regexp every sandbox id matches
	Placement         PlacementSettings `json:"placement"`
	Thresholds        Thresholds        `json:"thresholds"`
	Priority          PrioritySettings  `json:"priority"`
	Sandbox           SandboxSettings   `json:"sandbox"`
	NodeBudgetDefault BudgetLimits      `json:"node_budget_default"`
	Lifetime          LifetimeSettings  `json:"lifetime"`
	Exec              ExecSettings      `json:"exec"`
	Files             FilesSettings     `json:"files"`
	Images            ChoiceSettings    `json:"images"`
	Runtimes          RuntimeSettings   `json:"runtimes"`
	// Profiles maps a profile name (strict, workspace) to its container settings.
	Profiles map[string]ProfileSettings `json:"profiles"`
	// Networks maps a network name (none, egress) to its docker network mode.
	Networks map[string]NetworkSettings `json:"networks"`
	Docker   DockerSettings             `json:"docker"`
	// Roles maps a token role (operator, agent, session) to its scopes.
	Roles map[string]RoleSettings `json:"roles"`
	// RateLimits maps a token role, and RateLimitAnonymous, to its request
	// rate (Q1): every role of Roles has one, and so do the anonymous
	// routes. The gateway holds the buckets; the numbers are the bundle's.
	RateLimits map[string]RateLimit `json:"rate_limits"`
	// Tokens bounds what POST /v1/tokens may mint (T4).
	Tokens TokenSettings `json:"tokens"`
	// AgentQuota bounds an agent token's quota of live sandboxes (B3).
	AgentQuota AgentQuotaSettings `json:"agent_quota"`
	// Hosts holds the operator states and budget bounds of a host (B1).
	Hosts HostSettings `json:"hosts"`
	// Capabilities are what GET /v1/capabilities advertises (C1).
	Capabilities []string `json:"capabilities"`
	// Routes is the route table of T2 and C1: method, then Echo route
	// template, then who may call it.
	Routes RouteTable `json:"routes"`
	// Enforcement maps a rule id of the authz or admission decision to its
	// mode (ModeWarn, ModeDryRun); a rule not named is ModeDeny.
	Enforcement map[string]string `json:"enforcement"`
}

// RoleSettings holds the scopes a role is granted (T1, T2).
type RoleSettings struct {
	Scopes []string `json:"scopes"`
}

// TokenSettings bounds minted tokens (T4).
type TokenSettings struct {
	MinTTLSeconds   int      `json:"min_ttl_seconds"`
	MaxTTLSeconds   int      `json:"max_ttl_seconds"`
	MintableRoles   []string `json:"mintable_roles"`
	ReissueOnRepeat bool     `json:"reissue_on_repeat"`
}

// AgentQuotaSettings bounds an agent token's quota (B3).
type AgentQuotaSettings struct {
	DefaultMaxLiveSandboxes int `json:"default_max_live_sandboxes"`
	MaxLiveSandboxes        int `json:"max_live_sandboxes"`
}

// HostSettings holds what the hosts decision reads (B1, R2).
type HostSettings struct {
	States              []string `json:"states"`
	BudgetFigures       []string `json:"budget_figures"`
	MaxSandboxesCeiling int      `json:"max_sandboxes_ceiling"`
}

// RoleScopes returns a copy of the scopes granted to role; nil for an
// unknown role.
func (s Settings) RoleScopes(role string) []string {
	r, ok := s.Roles[role]
	if !ok {
		return nil
	}
	return append([]string(nil), r.Scopes...)
}

// RouteTable is the route table of T2 and C1: method, then Echo route
// template, then who may call it.
type RouteTable map[string]map[string]RouteSettings

// UnmarshalJSON reads a route table of the shape above; one of any other
// shape (an older bundle's) reads as empty, which opens no route to
// RouteOpen. The policy judges the table it has either way.
func (t *RouteTable) UnmarshalJSON(b []byte) error {
	var m map[string]map[string]RouteSettings
	if err := json.Unmarshal(b, &m); err != nil {
		m = nil
	}
	*t = m
	return nil
}

// RouteSettings is one entry of the route table (T2, C1).
type RouteSettings struct {
	Capability string   `json:"capability"`
	Scope      string   `json:"scope"`
	Roles      []string `json:"roles"`
	Target     string   `json:"target"`
}

// RouteOpen reports whether the route table lets a token of role with
// scopes call method on route (an Echo route template) while the route's
// capability is advertised: the conditions of T2's route-table rule and
// of C1, read from the same data. It serves to offer a caller only what
// it may use (the MCP tools a token lists); the policy still decides each
// request, and may refuse more (a sandbox of another principal, say).
func (s Settings) RouteOpen(method, route, role string, scopes []string) bool {
	r, ok := s.Routes[method][route]
	return ok && slices.Contains(r.Roles, role) && slices.Contains(scopes, r.Scope) &&
		slices.Contains(s.Capabilities, r.Capability)
}

// SessionScopes returns the scopes of a session token.
func (s Settings) SessionScopes() []string { return s.RoleScopes("session") }

// RateLimitAnonymous is the key of RateLimits that bounds the routes that
// take no token, per client address.
const RateLimitAnonymous = "anonymous"

// RateLimit is one token bucket of policy data (Q1): it refills at
// RequestsPerSecond and holds at most Burst requests.
type RateLimit struct {
	RequestsPerSecond float64 `json:"requests_per_second"`
	Burst             int     `json:"burst"`
}

// Valid reports whether the limit admits anything: a positive rate and a
// burst of at least one request.
func (l RateLimit) Valid() bool { return l.RequestsPerSecond > 0 && l.Burst >= 1 }

// PlacementSettings holds where sandboxes may run.
type PlacementSettings struct {
	AllowedOS            []string `json:"allowed_os"`
	AllowedArchitectures []string `json:"allowed_architectures"`
	// EgressEnrollment is the enrollment of nodes that take egress sandboxes.
	EgressEnrollment string `json:"egress_enrollment"`
	// EgressIsolation says how a node declares the isolation bundle (I5).
	EgressIsolation EgressIsolation `json:"egress_isolation"`
	// ControlPlane lists the control-plane indicators of policy data (P2,
	// I4): the isolation script checks the same ones on the host.
	ControlPlane ControlPlaneSettings `json:"control_plane"`
}

// ControlPlaneSettings are the configurable control-plane indicators.
type ControlPlaneSettings struct {
	// Meta maps a node meta key to the values that mark a control plane.
	Meta map[string][]string `json:"meta"`
	// NodeNames are names of control-plane nodes.
	NodeNames []string `json:"node_names"`
	// ServerColocation: a Nomad server on the same host marks a control plane.
	ServerColocation bool `json:"server_colocation"`
}

// EgressIsolation is the node meta by which a node declares the egress
// isolation bundle (I5).
type EgressIsolation struct {
	MetaKey          string   `json:"meta_key"`
	AcceptedVersions []string `json:"accepted_versions"`
}

// Thresholds are node usage percentages (P3, R3).
type Thresholds struct {
	RefuseCreateMemoryPercent float64 `json:"refuse_create_memory_percent"`
	RefuseCreateDiskPercent   float64 `json:"refuse_create_disk_percent"`
	ReclaimDiskPercent        float64 `json:"reclaim_disk_percent"`
	ReclaimMemoryPercent      float64 `json:"reclaim_memory_percent"`
}

// PrioritySettings holds the sandbox job priority and the ceiling it stays below (R1).
type PrioritySettings struct {
	Default int `json:"default"`
	Ceiling int `json:"ceiling"`
}

// SandboxSettings holds per-sandbox resource defaults and bounds (B2).
type SandboxSettings struct {
	DefaultCPUMHz   int `json:"default_cpu_mhz"`
	DefaultMemoryMB int `json:"default_memory_mb"`
	MinCPUMHz       int `json:"min_cpu_mhz"`
	MinMemoryMB     int `json:"min_memory_mb"`
	MaxCPUMHz       int `json:"max_cpu_mhz"`
	MaxMemoryMB     int `json:"max_memory_mb"`
	// States names the store's sandbox states as the policy judges them:
	// live (may run work) and terminal.
	States SandboxStates `json:"states"`
}

// SandboxStates is sandbox.states of policy data.
type SandboxStates struct {
	Live     []string `json:"live"`
	Terminal []string `json:"terminal"`
}

// LifetimeSettings holds TTL bounds and the lifetime ceiling, in seconds (L2, H8).
type LifetimeSettings struct {
	DefaultTTLSeconds int `json:"default_ttl_seconds"`
	MinTTLSeconds     int `json:"min_ttl_seconds"`
	CeilingSeconds    int `json:"ceiling_seconds"`
}

// ExecSettings holds exec and logs limits (E1-E3).
type ExecSettings struct {
	DefaultTimeoutSeconds int `json:"default_timeout_seconds"`
	MaxTimeoutSeconds     int `json:"max_timeout_seconds"`
	MaxOutputBytes        int `json:"max_output_bytes"`
	MaxVectorBytes        int `json:"max_vector_bytes"`
	MaxArgs               int `json:"max_args"`
	MaxStdinBytes         int `json:"max_stdin_bytes"`
	MaxEnv                int `json:"max_env"`
	MaxLogsTailBytes      int `json:"max_logs_tail_bytes"`
	// EnvNamePattern and ReservedEnvPrefixes are what E1 holds env names
	// to; Go reads them only to test that it does.
	EnvNamePattern      string   `json:"env_name_pattern"`
	ReservedEnvPrefixes []string `json:"reserved_env_prefixes"`
	// MaxWorkdirBytes and WorkdirRoots are what E1 holds a workdir to (at
	// most that many bytes, at or under one of the roots on a segment
	// boundary); Go reads them only to test that it does.
	MaxWorkdirBytes int      `json:"max_workdir_bytes"`
	WorkdirRoots    []string `json:"workdir_roots"`
}

// FilesSettings bounds the files routes (F1, F2). The gateway reads the
// roots to hand them to the in-sandbox script, which refuses a symbolic
// link that leaves them; the policy alone decides which paths are allowed.
type FilesSettings struct {
	Roots          []string `json:"roots"`
	MaxPathBytes   int      `json:"max_path_bytes"`
	MaxWriteBytes  int64    `json:"max_write_bytes"`
	MaxReadBytes   int64    `json:"max_read_bytes"`
	MaxListEntries int      `json:"max_list_entries"`
	TimeoutSeconds int      `json:"timeout_seconds"`
	// DefaultMode is the permission bits of a written file without ?mode=.
	DefaultMode uint32 `json:"default_mode"`
	// AllowedModeBits is what F2 holds ?mode= to.
	AllowedModeBits uint32 `json:"allowed_mode_bits"`
}

// ChoiceSettings is an allowlist with its default.
type ChoiceSettings struct {
	Default string   `json:"default"`
	Allowed []string `json:"allowed"`
}

// RuntimeSettings holds the OCI runtimes docker may use (H10).
type RuntimeSettings struct {
	Default       string   `json:"default"`
	Allowed       []string `json:"allowed"`
	EgressAllowed []string `json:"egress_allowed"`
}

// ProfileSettings holds what a profile adds back and whether its root is read-only.
type ProfileSettings struct {
	CapAdd         []string `json:"cap_add"`
	ReadonlyRootfs bool     `json:"readonly_rootfs"`
}

// NetworkSettings holds the docker network_mode of a sandbox network.
type NetworkSettings struct {
	NetworkMode string   `json:"network_mode"`
	Enrollment  []string `json:"enrollment"`
	// DNSServers are the resolvers of the network's containers (H7).
	DNSServers []string `json:"dns_servers"`
}

// DockerSettings holds container limits the renderer applies (H3, H6).
type DockerSettings struct {
	PidsLimitDefault int               `json:"pids_limit_default"`
	PidsLimitMax     int               `json:"pids_limit_max"`
	UlimitDefault    map[string]string `json:"ulimit_default"`
	// Tmpfs maps a mount target (/workspace, /tmp) to its size default and cap.
	Tmpfs map[string]TmpfsSettings `json:"tmpfs"`
	// TaskDirs are the directories Nomad itself mounts into every task and
	// the quota that bounds what a sandbox writes there (H5).
	TaskDirs TaskDirSettings `json:"task_dirs"`
}

// TaskDirSettings describe Nomad's own mounts and the per-sandbox disk quota
// on them (H5). Nomad 1.6.5's docker driver bind-mounts /alloc and /local
// from the client's data disk, read-write and executable, and /secrets from
// a 1 MiB tmpfs; nothing in Nomad caps the first two, so the usage monitor
// measures them and ends a sandbox past QuotaMB ("disk_quota").
type TaskDirSettings struct {
	// QuotaMB is the most a sandbox may keep in its host-disk task
	// directories, in MiB; it is also the job's ephemeral disk (scheduling).
	QuotaMB int `json:"quota_mb"`
	// Mounts are the mounts Nomad adds to every task, shown to admission.
	Mounts []NomadMount `json:"mounts"`
}

// NomadMount is one directory Nomad mounts into every task.
type NomadMount struct {
	Target string `json:"target"` // where the task sees it: /alloc, /local, /secrets
	// HostDisk: the mount is a directory on the client's disk (bounded only
	// by the quota), not a size-capped tmpfs.
	HostDisk bool `json:"host_disk"`
	// NoExec: the kernel refuses to execute files from it.
	NoExec bool `json:"noexec"`
	// TmpfsMB is the size of a tmpfs mount in MiB; 0 for a host-disk one.
	TmpfsMB int `json:"tmpfs_mb,omitempty"`
}

// TmpfsSettings holds a tmpfs work area's size, in MiB.
type TmpfsSettings struct {
	DefaultMB int `json:"default_mb"`
	MaxMB     int `json:"max_mb"`
}

// ErrSettings means the bundle's data lacks a value Go code needs.
var ErrSettings = errors.New("policies: bundle data")

// settingsFrom decodes data.sandgate.config and checks that every value the
// Go side relies on is present: a bundle missing one is refused.
func settingsFrom(data map[string]any) (Settings, error) {
	var s Settings
	sg, _ := data["sandgate"].(map[string]any)
	cfg, ok := sg["config"]
	if !ok {
		return s, fmt.Errorf("%w: data.sandgate.config is missing", ErrSettings)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrSettings, err)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("%w: data.sandgate.config: %w", ErrSettings, err)
	}
	return s, s.validate()
}

func (s Settings) validate() error {
	var missing []string
	need := func(ok bool, name string) {
		if !ok {
			missing = append(missing, name)
		}
	}
	need(s.Prefix != "", "prefix")
	need(s.SandboxIDPattern != "", "sandbox_id_pattern")
	need(len(s.Placement.AllowedOS) > 0, "placement.allowed_os")
	need(len(s.Placement.AllowedArchitectures) > 0, "placement.allowed_architectures")
	need(s.Placement.EgressEnrollment != "", "placement.egress_enrollment")
	need(s.Placement.EgressIsolation.MetaKey != "", "placement.egress_isolation.meta_key")
	need(s.Priority.Default > 0 && s.Priority.Default < s.Priority.Ceiling, "priority.default below priority.ceiling")
	need(s.Sandbox.DefaultCPUMHz > 0 && s.Sandbox.DefaultMemoryMB > 0, "sandbox.default_cpu_mhz, sandbox.default_memory_mb")
	need(len(s.Sandbox.States.Live) > 0 && len(s.Sandbox.States.Terminal) > 0, "sandbox.states.live, sandbox.states.terminal")
	need(s.Lifetime.DefaultTTLSeconds > 0 && s.Lifetime.CeilingSeconds >= s.Lifetime.DefaultTTLSeconds, "lifetime.default_ttl_seconds within lifetime.ceiling_seconds")
	need(s.Exec.DefaultTimeoutSeconds > 0 && s.Exec.MaxTimeoutSeconds >= s.Exec.DefaultTimeoutSeconds, "exec.default_timeout_seconds within exec.max_timeout_seconds")
	need(s.Exec.MaxOutputBytes > 0, "exec.max_output_bytes")
	need(len(s.Files.Roots) > 0, "files.roots")
	// F1 and E1 (sandgate.lib.paths): a root that is not a normalised
	// absolute path matches nothing in Rego; it is a typo in the data, so
	// the bundle is refused rather than served with a root that is dead.
	for _, l := range []struct {
		name  string
		roots []string
	}{{"files.roots", s.Files.Roots}, {"exec.workdir_roots", s.Exec.WorkdirRoots}} {
		for i, r := range l.roots {
			need(NormalisedAbsolute(r), fmt.Sprintf("%s[%d] as a normalised absolute path (it starts with '/'; no empty, '.' or '..' segment; no trailing '/'), not %q", l.name, i, r))
		}
	}
	need(s.Files.MaxReadBytes > 0, "files.max_read_bytes")
	need(s.Files.MaxListEntries > 0, "files.max_list_entries")
	need(s.Files.TimeoutSeconds > 0, "files.timeout_seconds")
	need(s.Files.DefaultMode&^0o777 == 0, "files.default_mode within 0777")
	need(s.Images.Default != "", "images.default")
	need(s.Runtimes.Default != "", "runtimes.default")
	need(s.Docker.PidsLimitDefault > 0, "docker.pids_limit_default")
	need(s.Docker.UlimitDefault["nofile"] != "" && s.Docker.UlimitDefault["nproc"] != "", "docker.ulimit_default.nofile, .nproc")
	for _, target := range []string{"/workspace", "/tmp"} {
		need(s.Docker.Tmpfs[target].DefaultMB > 0, "docker.tmpfs."+target+".default_mb")
	}
	for _, p := range []string{"strict", "workspace"} {
		_, ok := s.Profiles[p]
		need(ok, "profiles."+p)
	}
	for _, n := range []string{"none", "egress"} {
		need(s.Networks[n].NetworkMode != "", "networks."+n+".network_mode")
	}
	// Q1: a role without a rate limit would be refused every request;
	// refuse the bundle instead, before it serves.
	for _, r := range slices.Sorted(maps.Keys(s.Roles)) {
		need(s.RateLimits[r].Valid(), "rate_limits."+r+" (requests_per_second > 0, burst >= 1)")
	}
	need(s.RateLimits[RateLimitAnonymous].Valid(), "rate_limits."+RateLimitAnonymous+" (requests_per_second > 0, burst >= 1)")
	if len(missing) > 0 {
		return fmt.Errorf("%w: data.sandgate.config lacks %s", ErrSettings, strings.Join(missing, "; "))
	}
	return nil
}

// NormalisedAbsolute reports whether p is "/", or "/" followed by segments
// none of which is empty, "." or "..", with no trailing "/": the Go twin of
// sandgate.lib.paths.normalised_absolute, used to refuse odd roots at load.
func NormalisedAbsolute(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
