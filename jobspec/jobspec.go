package jobspec

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"sandgate/policies"
	"sandgate/render"
)

// RenderConfig takes the profile and network definitions from the policy
// bundle's data, so the renderer and the policy read one source.
func RenderConfig(s policies.Settings) render.Config {
	cfg := render.DefaultConfig()
	cfg.Profiles = make(map[render.Profile]render.ProfileConfig, len(s.Profiles))
	for name, p := range s.Profiles {
		cfg.Profiles[render.Profile(name)] = render.ProfileConfig{CapAdd: p.CapAdd, ReadonlyRootfs: p.ReadonlyRootfs}
	}
	cfg.NetworkModes = make(map[render.Network]string, len(s.Networks))
	cfg.DNSServers = make(map[render.Network][]string, len(s.Networks))
	for name, n := range s.Networks {
		cfg.NetworkModes[render.Network(name)] = n.NetworkMode
		if len(n.DNSServers) > 0 {
			cfg.DNSServers[render.Network(name)] = n.DNSServers
		}
	}
	return cfg
}

// Request is what a caller asks for; zero fields take the policy data's
// defaults.
type Request struct {
	ID       string
	Node     string
	Arch     string
	Profile  string
	Network  string
	TTL      time.Duration
	CPUMHz   int
	MemoryMB int
	Image    string
	// Namespace is the Nomad namespace of the job: the gateway's Nomad
	// client's, which refuses any other. "" is the renderer's default.
	Namespace string
}

// New fills a render spec from a request and the bundle's defaults. It
// fails only when the policy data itself is unusable.
func New(s policies.Settings, req Request, now time.Time) (render.SandboxSpec, error) {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	orInt := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	nofile, err := parseUlimit(s.Docker.UlimitDefault["nofile"])
	if err != nil {
		return render.SandboxSpec{}, fmt.Errorf("policy data docker.ulimit_default.nofile: %w", err)
	}
	nproc, err := parseUlimit(s.Docker.UlimitDefault["nproc"])
	if err != nil {
		return render.SandboxSpec{}, fmt.Errorf("policy data docker.ulimit_default.nproc: %w", err)
	}
	if len(s.Placement.AllowedOS) == 0 || len(s.Placement.AllowedArchitectures) == 0 {
		return render.SandboxSpec{}, fmt.Errorf("policy data placement: allowed_os and allowed_architectures must not be empty")
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = time.Duration(s.Lifetime.DefaultTTLSeconds) * time.Second
	}
	id := req.ID
	if id == "" {
		id = NewSandboxID()
	}
	return render.SandboxSpec{
		ID:              id,
		Prefix:          s.Prefix,
		Node:            req.Node,
		OS:              s.Placement.AllowedOS[0],
		Arch:            or(req.Arch, s.Placement.AllowedArchitectures[0]),
		Profile:         render.Profile(or(req.Profile, string(render.ProfileStrict))),
		Network:         render.Network(or(req.Network, string(render.NetworkNone))),
		LifetimeCeiling: time.Duration(s.Lifetime.CeilingSeconds) * time.Second,
		TTL:             ttl,
		CreatedAt:       now,
		CPUMHz:          orInt(req.CPUMHz, s.Sandbox.DefaultCPUMHz),
		MemoryMB:        orInt(req.MemoryMB, s.Sandbox.DefaultMemoryMB),
		Image:           or(req.Image, s.Images.Default),
		Priority:        s.Priority.Default,
		WorkspaceMB:     s.Docker.Tmpfs["/workspace"].DefaultMB,
		TmpMB:           s.Docker.Tmpfs["/tmp"].DefaultMB,
		PidsLimit:       s.Docker.PidsLimitDefault,
		Ulimits:         render.Ulimits{NoFile: nofile, NProc: nproc},
		Runtime:         s.Runtimes.Default,
		DiskMB:          s.Docker.TaskDirs.QuotaMB,
	}, nil
}

// parseUlimit reads docker's "soft:hard".
func parseUlimit(v string) (render.Ulimit, error) {
	soft, hard, ok := strings.Cut(v, ":")
	if !ok {
		return render.Ulimit{}, fmt.Errorf("%q is not soft:hard", v)
	}
	s, err1 := strconv.Atoi(soft)
	h, err2 := strconv.Atoi(hard)
	if err1 != nil || err2 != nil {
		return render.Ulimit{}, fmt.Errorf("%q is not soft:hard with integers", v)
	}
	return render.Ulimit{Soft: s, Hard: h}, nil
}

// sandboxIDAlphabet is lowercase base32: ids match ^[a-z0-9]{8,32}$.
const sandboxIDAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// NewSandboxID returns 16 random characters (80 bits).
func NewSandboxID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	for i := range b {
		b[i] = sandboxIDAlphabet[b[i]&31]
	}
	return string(b[:])
}

// WorkerFacts describes a healthy, idle, enrolled worker for when there is
// no Nomad to ask (sandgate render without a cluster): ready, eligible, not
// draining, operator state active, the first allowed OS and the given
// architecture, no usage, and room for exactly node_budget_default with
// nothing allocated.
func WorkerFacts(name, arch, enrollment string, s policies.Settings) policies.NodeFacts {
	zero := 0.0
	return policies.NodeFacts{
		ID:          "00000000-0000-0000-0000-000000000000",
		Name:        name,
		Status:      "ready",
		Eligibility: "eligible",
		Attributes: map[string]string{
			"kernel.name":     s.Placement.AllowedOS[0],
			"cpu.arch":        arch,
			"unique.hostname": name,
		},
		Meta:          map[string]string{},
		OperatorState: "active",
		Enrollment:    enrollment,
		Usage:         policies.NodeUsage{MemoryPercent: &zero, DiskPercent: &zero},
		Capacity: &policies.NodeCapacity{Allocatable: policies.Resources{
			CPUMHz: s.NodeBudgetDefault.CPUMHz, MemoryMB: s.NodeBudgetDefault.MemoryMB,
		}},
	}
}

// NomadMounts returns the mounts Nomad adds to every task, as policy data
// states them (docker.task_dirs.mounts), for the admission input; nil when
// the data states none, which admission refuses (INPUT).
func NomadMounts(s policies.Settings) []policies.NomadMount {
	return slices.Clone(s.Docker.TaskDirs.Mounts)
}

// AdmissionInput assembles the admission document for one rendered job;
// mounts are Nomad's own (NomadMounts).
func AdmissionInput(spec render.SandboxSpec, jobJSON []byte, node policies.NodeFacts, budget policies.Budget, principal policies.PrincipalFacts, mounts []policies.NomadMount) *policies.AdmissionInput {
	return &policies.AdmissionInput{
		Now: spec.CreatedAt.Unix(),
		Sandbox: policies.SandboxFacts{
			ID:        spec.ID,
			Profile:   string(spec.Profile),
			Network:   string(spec.Network),
			Principal: principal.ID(),
			CreatedAt: spec.CreatedAt.Unix(),
			CeilingAt: spec.CeilingAt().Unix(),
		},
		Job:         jobJSON,
		Node:        node,
		Budget:      budget,
		Principal:   principal,
		NomadMounts: mounts,
	}
}

// Render fills the spec of req with the bundle's defaults and renders it.
// It returns the spec, the job and the job as the JSON that is submitted
// (and that admission judges). Errors from the renderer are
// *render.FieldError values naming the field.
func Render(s policies.Settings, req Request, now time.Time) (render.SandboxSpec, *api.Job, []byte, error) {
	spec, err := New(s, req, now)
	if err != nil {
		return spec, nil, nil, err
	}
	cfg := RenderConfig(s)
	if req.Namespace != "" {
		cfg.Namespace = req.Namespace
	}
	r, err := render.New(cfg)
	if err != nil {
		return spec, nil, nil, err
	}
	job, err := r.Job(spec)
	if err != nil {
		return spec, nil, nil, err
	}
	jobJSON, err := json.Marshal(job)
	if err != nil {
		return spec, nil, nil, fmt.Errorf("marshal job: %w", err)
	}
	return spec, job, jobJSON, nil
}
