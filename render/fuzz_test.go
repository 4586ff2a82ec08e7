package render

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzJob feeds arbitrary values into a spec: Job must never panic, and must
// either refuse with ErrInvalidSpec or return a job that keeps its invariants.
func FuzzJob(f *testing.F) {
	v := validSpec(ProfileStrict, NetworkNone)
	f.Add(v.ID, v.Prefix, v.Node, v.OS, v.Arch, string(v.Profile), string(v.Network),
		int64(v.LifetimeCeiling), int64(v.TTL), v.CreatedAt.Unix(), v.CPUMHz, v.MemoryMB, v.Image,
		v.Priority, v.WorkspaceMB, v.TmpMB, v.PidsLimit, 1024, 1024, 512, 512, v.Runtime)
	f.Add("abcdefgh", "x-", "${node.unique.name}", "linux", "amd64", "workspace", "egress",
		int64(time.Minute), int64(time.Minute), int64(1), 1, 1, "alpine:3.20", 100, 1, 1, 1, 1, 1, 1, 1, "runsc")
	f.Add("", "", "", "", "", "", "", int64(-1), int64(-1), int64(-1), -1, -1, "", -1, -1, -1, -1, -1, -1, -1, -1, "")
	r := newRenderer(f)
	f.Fuzz(func(t *testing.T, id, prefix, node, osName, arch, profile, network string,
		ceiling, ttl, created int64, cpu, mem int, image string, priority, ws, tmp, pids,
		nofileSoft, nofileHard, nprocSoft, nprocHard int, runtime string,
	) {
		spec := SandboxSpec{
			ID: id, Prefix: prefix, Node: node, OS: osName, Arch: arch,
			Profile: Profile(profile), Network: Network(network),
			LifetimeCeiling: time.Duration(ceiling), TTL: time.Duration(ttl),
			CreatedAt: time.Unix(created, 0), CPUMHz: cpu, MemoryMB: mem, Image: image,
			Priority: priority, WorkspaceMB: ws, TmpMB: tmp, PidsLimit: pids,
			Ulimits: Ulimits{
				NoFile: Ulimit{Soft: nofileSoft, Hard: nofileHard},
				NProc:  Ulimit{Soft: nprocSoft, Hard: nprocHard},
			},
			Runtime: runtime,
			DiskMB:  64,
		}
		job, err := r.Job(spec)
		if err != nil {
			if job != nil || !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("Job = %v, %v; want nil and an ErrInvalidSpec error", job, err)
			}
			return
		}
		if *job.ID != prefix+id || *job.Name != *job.ID || !strings.HasPrefix(*job.ID, prefix) {
			t.Fatalf("job ID %q Name %q, want %q", *job.ID, *job.Name, prefix+id)
		}
		cfg := job.TaskGroups[0].Tasks[0].Config
		secs, convErr := strconv.ParseInt(cfg["args"].([]string)[0], 10, 64)
		if convErr != nil || secs <= 0 || time.Duration(secs)*time.Second != spec.LifetimeCeiling {
			t.Fatalf("sleep args %v do not equal the ceiling %s", cfg["args"], spec.LifetimeCeiling)
		}
		if spec.TTL < time.Minute || spec.TTL > spec.LifetimeCeiling {
			t.Fatalf("accepted ttl %s outside [1m, %s]", spec.TTL, spec.LifetimeCeiling)
		}
		if job.Constraints[2].RTarget != node || strings.Contains(node, "${") {
			t.Fatalf("node constraint %+v for node %q", job.Constraints[2], node)
		}
		if cfg["privileged"] != false || cfg["network_mode"] == "host" {
			t.Fatalf("unsafe config %v", cfg)
		}
	})
}
