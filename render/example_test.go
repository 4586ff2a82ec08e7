package render

import (
	"errors"
	"fmt"
	"time"
)

func ExampleRenderer_Job() {
	r, err := New(DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	spec := SandboxSpec{
		ID: "k7x2m9p4q8r5t1v6", Prefix: "sandgate-sbx-",
		Node: "w1", OS: "linux", Arch: "arm64",
		Profile: ProfileStrict, Network: NetworkNone,
		LifetimeCeiling: 4 * time.Hour, TTL: time.Hour,
		CreatedAt: time.Unix(1764406800, 0),
		CPUMHz:    500, MemoryMB: 512,
		Image: "ubuntu:24.04", Priority: 10,
		WorkspaceMB: 256, TmpMB: 64, PidsLimit: 256,
		Ulimits: Ulimits{
			NoFile: Ulimit{Soft: 1024, Hard: 1024},
			NProc:  Ulimit{Soft: 512, Hard: 512},
		},
		Runtime: "runc", DiskMB: 64,
	}
	job, err := r.Job(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := job.TaskGroups[0].Tasks[0].Config
	pin := job.Constraints[2]
	fmt.Println(*job.ID, *job.Type, *job.Priority)
	fmt.Println(cfg["command"], cfg["args"], cfg["network_mode"], cfg["readonly_rootfs"])
	fmt.Println(pin.LTarget, pin.Operand, pin.RTarget)
	fmt.Println(job.Meta[MetaCeilingAt])

	spec.CPUMHz = 0
	_, err = r.Job(spec)
	var fe *FieldError
	fmt.Println(errors.Is(err, ErrInvalidSpec), errors.As(err, &fe) && fe.Field == "cpu_mhz")
	fmt.Println(err)
	// Output:
	// sandgate-sbx-k7x2m9p4q8r5t1v6 batch 10
	// sleep [14400] none true
	// ${node.unique.name} = w1
	// 1764421200
	// true true
	// render: invalid spec: field "cpu_mhz": must be positive
}
