package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// container is the part of `docker inspect` the hardening checks read.
type container struct {
	ID     string `json:"Id"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	Mounts []struct {
		Type        string `json:"Type"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
		RW          bool   `json:"RW"`
	} `json:"Mounts"`
	HostConfig struct {
		Privileged     bool     `json:"Privileged"`
		CapAdd         []string `json:"CapAdd"`
		CapDrop        []string `json:"CapDrop"`
		SecurityOpt    []string `json:"SecurityOpt"`
		ReadonlyRootfs bool     `json:"ReadonlyRootfs"`
		Memory         int64    `json:"Memory"`
		MemorySwap     int64    `json:"MemorySwap"`
		PidsLimit      *int64   `json:"PidsLimit"`
		Init           *bool    `json:"Init"`
		IpcMode        string   `json:"IpcMode"`
		Runtime        string   `json:"Runtime"`
		NetworkMode    string   `json:"NetworkMode"`
		Binds          []string `json:"Binds"`
		Devices        []any    `json:"Devices"`
		PidMode        string   `json:"PidMode"`
		UsernsMode     string   `json:"UsernsMode"`
		Ulimits        []struct {
			Name string `json:"Name"`
			Soft int64  `json:"Soft"`
			Hard int64  `json:"Hard"`
		} `json:"Ulimits"`
		Mounts []struct {
			Type         string `json:"Type"`
			Target       string `json:"Target"`
			ReadOnly     bool   `json:"ReadOnly"`
			TmpfsOptions *struct {
				SizeBytes int64 `json:"SizeBytes"`
			} `json:"TmpfsOptions"`
		} `json:"Mounts"`
	} `json:"HostConfig"`
}

// inspectSandbox finds the running container of a sandbox by the label
// the renderer sets and inspects it.
func inspectSandbox(t testing.TB, sandboxID string) container {
	t.Helper()
	var ids string
	eventually(t, 20*time.Second, "a running container labelled sandgate.sandbox_id="+sandboxID, func() bool {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label=sandgate.sandbox_id="+sandboxID).Output() //nolint:gosec // G204: a sandbox id the gateway generated
		ids = strings.TrimSpace(string(out))
		return err == nil && ids != ""
	})
	if strings.Contains(ids, "\n") {
		t.Fatalf("more than one container for sandbox %s: %q", sandboxID, ids)
	}
	out, err := exec.Command("docker", "inspect", ids).Output() //nolint:gosec // G204: an id docker listed
	if err != nil {
		t.Fatalf("docker inspect %s: %v", ids, err)
	}
	var cs []container
	if err := json.Unmarshal(out, &cs); err != nil || len(cs) != 1 {
		t.Fatalf("docker inspect %s: %v (%d containers)", ids, err, len(cs))
	}
	return cs[0]
}

// containersOf counts the containers, running or not, of a sandbox.
func containersOf(sandboxID string) int {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=sandgate.sandbox_id="+sandboxID).Output() //nolint:gosec // G204: a sandbox id the gateway generated
	if err != nil {
		return -1
	}
	return len(strings.Fields(string(out)))
}
