// Package render turns a validated SandboxSpec into the hardened Nomad job
// (*api.Job) that sandgate submits for one sandbox.
//
// The package is pure: no I/O, no clock, no environment. The same spec and
// Config always render the same job, so the output is pinned by golden files
// in testdata/. Validation here is structural only (well-formed ids, positive
// sizes, TTL within the ceiling); every threshold and allowlist (maximum CPU,
// allowed images, runtimes, priority ceiling, ...) is the policy's to decide
// on the rendered job during admission.
package render

import (
	"time"

	"github.com/hashicorp/nomad/api"
)

// Profile names a sandbox hardening profile.
type Profile string

// The built-in profiles (docs/api.md, Create; rules H1, H6).
const (
	// ProfileStrict is a read-only root filesystem with no capabilities.
	ProfileStrict Profile = "strict"
	// ProfileWorkspace is a writable root with a short list of capabilities.
	ProfileWorkspace Profile = "workspace"
)

// Network names a sandbox network mode.
type Network string

// The built-in networks (docs/api.md, Create; rules H7, I5).
const (
	// NetworkNone gives the container no network at all.
	NetworkNone Network = "none"
	// NetworkEgress attaches the container to the dedicated egress bridge.
	NetworkEgress Network = "egress"
)

// Keys the renderer writes into the job's Meta and the container's labels.
// The gateway and the reconciler read them back from Nomad.
const (
	// MetaSandboxID is the job Meta key holding the sandbox id.
	MetaSandboxID = "sandgate.sandbox_id"
	// MetaProfile is the job Meta key holding the profile name.
	MetaProfile = "sandgate.profile"
	// MetaNetwork is the job Meta key holding the network name.
	MetaNetwork = "sandgate.network"
	// MetaCeilingAt is the job Meta key holding the lifetime ceiling as unix seconds.
	MetaCeilingAt = "sandgate.ceiling_at"
	// LabelSandboxID is the docker label holding the sandbox id.
	LabelSandboxID = "sandgate.sandbox_id"
)

// Ulimit is one docker ulimit as a soft and a hard limit (rendered "soft:hard").
type Ulimit struct {
	// Soft is the soft limit; it must be positive and at most Hard.
	Soft int
	// Hard is the hard limit; it must be positive.
	Hard int
}

// Ulimits are the docker ulimits a sandbox runs with.
type Ulimits struct {
	// NoFile limits open file descriptors (docker "nofile").
	NoFile Ulimit
	// NProc limits processes per user (docker "nproc").
	NProc Ulimit
}

// SandboxSpec is everything the renderer needs for one sandbox. The caller
// (the gateway) fills every field, applying defaults from policy data; render
// applies none. Fields are validated in declaration order and the first
// invalid one is reported as a *FieldError named by the JSON/REST name given
// in brackets.
type SandboxSpec struct {
	// ID is the sandbox id [id]; it must match ^[a-z0-9]{8,32}$.
	ID string
	// Prefix starts every sandbox job id [prefix], e.g. "sandgate-sbx-": lowercase
	// letters, digits and '-', starting with a letter or digit and ending with '-'.
	Prefix string
	// Node is the Nomad node name the job is pinned to [node].
	Node string
	// OS is the required ${attr.kernel.name}, e.g. "linux" [os].
	OS string
	// Arch is the required ${attr.cpu.arch}, e.g. "arm64" [arch].
	Arch string
	// Profile is the hardening profile; it must be a key of Config.Profiles [profile].
	Profile Profile
	// Network is the network; it must be a key of Config.NetworkModes [network].
	Network Network
	// LifetimeCeiling is the absolute lifetime from CreatedAt [lifetime_ceiling]:
	// the container sleeps exactly this long. Positive, a whole number of seconds.
	LifetimeCeiling time.Duration
	// TTL is the requested time to live [ttl], at least one minute and at most
	// LifetimeCeiling. It is enforced by the gateway and does not appear in the job.
	TTL time.Duration
	// CreatedAt is the creation time [created_at]; it must be after the unix
	// epoch. Meta records CreatedAt+LifetimeCeiling as unix seconds.
	CreatedAt time.Time
	// CPUMHz is the task's CPU reservation in MHz [cpu_mhz]; positive.
	CPUMHz int
	// MemoryMB is the task's memory in MB [memory_mb]; positive. It is also the
	// hard limit: no memory oversubscription is rendered.
	MemoryMB int
	// Image is the docker image reference [image]; the policy checks the allowlist.
	Image string
	// Priority is the Nomad job priority [priority], 1..100.
	Priority int
	// WorkspaceMB is the size of the /workspace tmpfs in MiB [workspace_mb]; positive.
	WorkspaceMB int
	// TmpMB is the size of the /tmp tmpfs in MiB [tmp_mb]; positive.
	TmpMB int
	// PidsLimit is the container's pids limit [pids_limit]; positive.
	PidsLimit int
	// Ulimits are the nofile and nproc ulimits [ulimits].
	Ulimits Ulimits
	// Runtime is the OCI runtime, e.g. "runc" or "runsc" [runtime].
	Runtime string
	// DiskMB is the group's ephemeral disk in MB [disk_mb]: the task-directory
	// quota of policy data (H5). Nomad schedules by it but does not enforce
	// it (the gateway's usage monitor does); it must exceed the log storage
	// Config.LogMaxFiles * Config.LogMaxFileSizeMB, as Nomad requires.
	DiskMB int
}

// JobID returns the Nomad job id (and name) of the sandbox: Prefix + ID.
func (s SandboxSpec) JobID() string { return s.Prefix + s.ID }

// CeilingAt returns the absolute lifetime ceiling, CreatedAt+LifetimeCeiling,
// truncated to whole unix seconds exactly as recorded in the job's Meta.
func (s SandboxSpec) CeilingAt() time.Time {
	return time.Unix(s.CreatedAt.Unix()+int64(s.LifetimeCeiling/time.Second), 0)
}

// Renderer renders sandbox jobs from one validated Config. It holds no
// mutable state and is safe for concurrent use.
type Renderer struct {
	cfg Config
}

// New validates cfg and returns a Renderer holding a private copy of it, so
// later changes to the caller's maps and slices do not leak into rendering.
// An unusable cfg yields an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Renderer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Renderer{cfg: cfg.clone()}, nil
}

// Job validates spec and renders its hardened Nomad job. An invalid spec
// yields a *FieldError (wrapping ErrInvalidSpec) naming the first invalid
// field, and no job. Every returned job is freshly allocated: callers may
// modify it without affecting later renders.
func (r *Renderer) Job(spec SandboxSpec) (*api.Job, error) {
	if err := r.validateSpec(spec); err != nil {
		return nil, err
	}
	return r.job(spec), nil
}
