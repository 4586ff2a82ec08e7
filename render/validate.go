package render

import (
	"math"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Structural limits. Thresholds (maximum CPU, TTL ceiling, ...) are policy data.
const (
	minTTL      = time.Minute
	minPriority = 1
	maxPriority = 100
	// maxTmpfsMB keeps the tmpfs size in bytes (MiB << 20) within an int64.
	maxTmpfsMB = math.MaxInt64 >> 20
)

var (
	// idPattern is the sandbox id pattern (policy data: sandbox_id_pattern).
	idPattern = regexp.MustCompile(`^[a-z0-9]{8,32}$`)
	// prefixPattern is a job-id prefix: lowercase, digits, '-', ending with '-'.
	prefixPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*-$`)
)

// validateSpec returns a *FieldError for the first invalid field of s, in
// SandboxSpec declaration order, or nil.
func (r *Renderer) validateSpec(s SandboxSpec) error {
	for _, check := range []func(SandboxSpec) *FieldError{
		checkIdentity,
		checkPlacement,
		r.checkKinds,
		checkLifetime,
		checkResources,
		checkContainer,
		r.checkDisk,
	} {
		if fe := check(s); fe != nil {
			return fe
		}
	}
	return nil
}

// checkIdentity validates id and prefix.
func checkIdentity(s SandboxSpec) *FieldError {
	if !idPattern.MatchString(s.ID) {
		return fieldErr("id", "must match %s", idPattern)
	}
	if !prefixPattern.MatchString(s.Prefix) {
		return fieldErr("prefix", "must match %s", prefixPattern)
	}
	return nil
}

// checkPlacement validates node, os and arch: they become constraint
// right-hand sides, where Nomad would interpolate "${...}".
func checkPlacement(s SandboxSpec) *FieldError {
	for _, f := range []struct{ name, value string }{
		{"node", s.Node}, {"os", s.OS}, {"arch", s.Arch},
	} {
		if reason := reasonIfNotToken(f.value); reason != "" {
			return fieldErr(f.name, "%s", reason)
		}
	}
	return nil
}

// checkKinds validates profile and network against the Config.
func (r *Renderer) checkKinds(s SandboxSpec) *FieldError {
	if _, ok := r.cfg.Profiles[s.Profile]; !ok {
		return fieldErr("profile", "unknown profile %q", s.Profile)
	}
	if _, ok := r.cfg.NetworkModes[s.Network]; !ok {
		return fieldErr("network", "unknown network %q", s.Network)
	}
	return nil
}

// checkLifetime validates lifetime_ceiling, ttl and created_at.
func checkLifetime(s SandboxSpec) *FieldError {
	switch {
	case s.LifetimeCeiling <= 0:
		return fieldErr("lifetime_ceiling", "must be positive")
	case s.LifetimeCeiling%time.Second != 0:
		return fieldErr("lifetime_ceiling", "must be a whole number of seconds")
	case s.TTL < minTTL:
		return fieldErr("ttl", "must be at least %s", minTTL)
	case s.TTL > s.LifetimeCeiling:
		return fieldErr("ttl", "must not exceed the lifetime ceiling %s", s.LifetimeCeiling)
	}
	created := s.CreatedAt.Unix()
	switch {
	case s.CreatedAt.IsZero() || created <= 0:
		return fieldErr("created_at", "must be after the unix epoch")
	case created > math.MaxInt64-int64(s.LifetimeCeiling/time.Second):
		return fieldErr("created_at", "ceiling overflows unix seconds")
	}
	return nil
}

// checkResources validates cpu_mhz and memory_mb.
func checkResources(s SandboxSpec) *FieldError {
	if s.CPUMHz <= 0 {
		return fieldErr("cpu_mhz", "must be positive")
	}
	if s.MemoryMB <= 0 {
		return fieldErr("memory_mb", "must be positive")
	}
	return nil
}

// checkContainer validates image, priority, tmpfs sizes, pids_limit, ulimits
// and runtime.
func checkContainer(s SandboxSpec) *FieldError {
	if reason := reasonIfNotToken(s.Image); reason != "" {
		return fieldErr("image", "%s", reason)
	}
	if s.Priority < minPriority || s.Priority > maxPriority {
		return fieldErr("priority", "must be in %d..%d", minPriority, maxPriority)
	}
	for _, f := range []struct {
		name string
		mb   int
	}{{"workspace_mb", s.WorkspaceMB}, {"tmp_mb", s.TmpMB}} {
		if f.mb <= 0 {
			return fieldErr(f.name, "must be positive")
		}
		if int64(f.mb) > maxTmpfsMB {
			return fieldErr(f.name, "size in bytes overflows int64")
		}
	}
	if s.PidsLimit <= 0 {
		return fieldErr("pids_limit", "must be positive")
	}
	for _, u := range []struct {
		name string
		lim  Ulimit
	}{{"nofile", s.Ulimits.NoFile}, {"nproc", s.Ulimits.NProc}} {
		if u.lim.Soft <= 0 || u.lim.Hard <= 0 {
			return fieldErr("ulimits", "%s soft and hard must be positive", u.name)
		}
		if u.lim.Soft > u.lim.Hard {
			return fieldErr("ulimits", "%s soft %d exceeds hard %d", u.name, u.lim.Soft, u.lim.Hard)
		}
	}
	if reason := reasonIfNotToken(s.Runtime); reason != "" {
		return fieldErr("runtime", "%s", reason)
	}
	return nil
}

// checkDisk validates disk_mb: Nomad refuses a job whose log storage is not
// below its ephemeral disk.
func (r *Renderer) checkDisk(s SandboxSpec) *FieldError {
	if logs := r.cfg.LogMaxFiles * r.cfg.LogMaxFileSizeMB; s.DiskMB <= logs {
		return fieldErr("disk_mb", "must exceed the log storage of %d MB (log_max_files * log_max_file_size_mb)", logs)
	}
	return nil
}

// reasonIfNotToken returns why v is not a plain token, or "" when it is one.
// A plain token is non-empty valid UTF-8 with no whitespace, no control or
// other non-printable characters and none of '$', '{', '}' (Nomad interpolates "${...}" in
// constraints and driver config).
func reasonIfNotToken(v string) string {
	switch {
	case v == "":
		return "must not be empty"
	case !utf8.ValidString(v):
		return "must be valid UTF-8"
	case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return "must not contain whitespace, control or non-printable characters"
	case strings.ContainsAny(v, "${}"):
		return "must not contain '$', '{' or '}'"
	}
	return ""
}
