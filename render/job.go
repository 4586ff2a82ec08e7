package render

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Fixed parts of every sandbox job (docs/policies.md, "The job sandgate
// renders"). They are hardening, not configuration.
const (
	driverDocker     = "docker"
	sleepCommand     = "sleep"
	workspaceTarget  = "/workspace"
	tmpTarget        = "/tmp"
	noNewPrivileges  = "no-new-privileges"
	ipcModePrivate   = "private"
	constraintEquals = "="
	bytesPerMiB      = 1 << 20
)

// job renders the job for a spec that validateSpec accepted.
func (r *Renderer) job(s SandboxSpec) *api.Job {
	jobID := s.JobID()
	ceilingSeconds := int64(s.LifetimeCeiling / time.Second)
	return &api.Job{
		Namespace:   new(r.cfg.Namespace),
		ID:          new(jobID),
		Name:        new(jobID),
		Type:        new(api.JobTypeBatch),
		Priority:    new(s.Priority),
		Datacenters: slices.Clone(r.cfg.Datacenters),
		NodePool:    new(r.cfg.NodePool),
		Constraints: []*api.Constraint{
			api.NewConstraint("${attr.kernel.name}", constraintEquals, s.OS),
			api.NewConstraint("${attr.cpu.arch}", constraintEquals, s.Arch),
			api.NewConstraint("${node.unique.name}", constraintEquals, s.Node),
		},
		Meta: map[string]string{
			MetaSandboxID: s.ID,
			MetaProfile:   string(s.Profile),
			MetaNetwork:   string(s.Network),
			MetaCeilingAt: strconv.FormatInt(s.CeilingAt().Unix(), 10),
		},
		TaskGroups: []*api.TaskGroup{{
			Name:  new(r.cfg.GroupName),
			Count: new(1),
			RestartPolicy: &api.RestartPolicy{
				Attempts: new(0),
				Mode:     new(api.RestartPolicyModeFail),
			},
			ReschedulePolicy: &api.ReschedulePolicy{
				Attempts:  new(0),
				Unlimited: new(false),
			},
			// What Nomad schedules by: the task-directory quota (H5). It caps
			// nothing; the gateway's usage monitor enforces the quota.
			EphemeralDisk: &api.EphemeralDisk{
				SizeMB:  new(s.DiskMB),
				Sticky:  new(false),
				Migrate: new(false),
			},
			Tasks: []*api.Task{r.task(s, ceilingSeconds)},
		}},
	}
}

// task renders the single docker task.
func (r *Renderer) task(s SandboxSpec, ceilingSeconds int64) *api.Task {
	return &api.Task{
		Name:   r.cfg.TaskName,
		Driver: driverDocker,
		Config: r.dockerConfig(s, ceilingSeconds),
		Resources: &api.Resources{
			CPU:      new(s.CPUMHz),
			MemoryMB: new(s.MemoryMB),
		},
		KillTimeout: new(r.cfg.KillTimeout),
		LogConfig: &api.LogConfig{
			MaxFiles:      new(r.cfg.LogMaxFiles),
			MaxFileSizeMB: new(r.cfg.LogMaxFileSizeMB),
		},
		Identity: &api.WorkloadIdentity{Env: false, File: false},
	}
}

// dockerConfig renders the docker driver config: exactly the keys of the
// contract, cap_add only when the profile adds capabilities.
func (r *Renderer) dockerConfig(s SandboxSpec, ceilingSeconds int64) map[string]any {
	profile := r.cfg.Profiles[s.Profile]
	cfg := map[string]any{
		"image":           s.Image,
		"command":         sleepCommand,
		"args":            []string{strconv.FormatInt(ceilingSeconds, 10)},
		"privileged":      false,
		"cap_drop":        []string{"ALL"},
		"security_opt":    []string{noNewPrivileges},
		"pids_limit":      s.PidsLimit,
		"ulimit":          ulimitConfig(s.Ulimits),
		"init":            true,
		"ipc_mode":        ipcModePrivate,
		"cpu_hard_limit":  true,
		"readonly_rootfs": profile.ReadonlyRootfs,
		"mount": []map[string]any{
			tmpfsMount(workspaceTarget, s.WorkspaceMB),
			tmpfsMount(tmpTarget, s.TmpMB),
		},
		"network_mode": r.cfg.NetworkModes[s.Network],
		"runtime":      s.Runtime,
		"labels":       []map[string]string{{LabelSandboxID: s.ID}},
	}
	if len(profile.CapAdd) > 0 {
		cfg["cap_add"] = slices.Clone(profile.CapAdd)
	}
	if dns := r.cfg.DNSServers[s.Network]; len(dns) > 0 {
		cfg["dns_servers"] = slices.Clone(dns)
	}
	return cfg
}

// ulimitConfig renders ulimits as docker "soft:hard" strings, in the shape the
// docker driver's schema requires for ulimit (and labels): a list of exactly
// one map of strings. The driver refuses an object at task start ("list of map
// of string required") although the server registers it, and Nomad merges the
// maps of a longer list.
func ulimitConfig(u Ulimits) []map[string]string {
	return []map[string]string{{
		"nofile": fmt.Sprintf("%d:%d", u.NoFile.Soft, u.NoFile.Hard),
		"nproc":  fmt.Sprintf("%d:%d", u.NProc.Soft, u.NProc.Hard),
	}}
}

// tmpfsMount renders one writable, size-capped tmpfs mount.
func tmpfsMount(target string, sizeMB int) map[string]any {
	return map[string]any{
		"type":     "tmpfs",
		"target":   target,
		"readonly": false,
		"tmpfs_options": map[string]any{
			"size": int64(sizeMB) * bytesPerMiB,
		},
	}
}
