package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// requireEnv, set to "require", turns a skip for a missing prerequisite
// into a failure (.ci/run sets it).
const requireEnv = "SANDGATE_E2E"

// repo is an image repository of its own, so that the test never retags
// or removes a developer's sandgate:dev.
const repo = "sandgate-imagetest"

// hostCA is the CA bundle the image copies from the build host.
const hostCA = "/etc/ssl/certs/ca-certificates.crt"

// need skips t (fails it under SANDGATE_E2E=require) without make or a
// reachable Docker engine.
func need(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("make"); err != nil {
		why = "skipped: make is not installed"
	} else if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		why = fmt.Sprintf("skipped: no Docker engine reachable (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if why == "" {
		return
	}
	if os.Getenv(requireEnv) == "require" {
		t.Fatalf("the image test must run here (%s=require): %s", requireEnv, why)
	}
	t.Skip(why)
}

// docker runs docker with args and returns its standard output; it fails
// t, showing both outputs, when docker fails.
func docker(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("docker", args...) //nolint:gosec // G204: the test's own docker commands
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// `make image` builds the image FROM scratch (two layers of its own and
// nothing else) under both tags; it runs `version` as the non-root user
// 65532 with the version and commit make stamped, can write its data dir,
// and carries the build host's CA bundle.
func TestMakeImageBuildsARunnableImageFromScratch(t *testing.T) {
	need(t)
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	version := fmt.Sprintf("0.0.0-imagetest.%d", time.Now().UnixNano())
	versioned, dev := repo+":"+version, repo+":dev"
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "--force", versioned, dev).Run() }) //nolint:gosec // G204: the test's own tags

	mk := exec.Command("make", "image", "IMAGE="+repo, "VERSION="+version) //nolint:gosec // G204: the repository's own make target
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}

	var images []struct {
		ID     string `json:"Id"`
		Config struct {
			User       string
			Entrypoint []string
		}
		RootFS struct{ Layers []string }
	}
	if err := json.Unmarshal(docker(t, "image", "inspect", versioned, dev), &images); err != nil || len(images) != 2 {
		t.Fatalf("docker image inspect: %d images, %v", len(images), err)
	}
	img := images[0]
	if images[1].ID != img.ID {
		t.Fatalf("%s is %s and %s is %s: want one image under both tags", versioned, img.ID, dev, images[1].ID)
	}
	if img.Config.User != "65532:65532" || strings.Join(img.Config.Entrypoint, " ") != "/usr/local/bin/sandgate" || len(img.RootFS.Layers) != 2 {
		t.Fatalf("image config: user %q, entrypoint %q, %d layers; want 65532:65532, the binary, the two layers of deploy/image/Dockerfile",
			img.Config.User, img.Config.Entrypoint, len(img.RootFS.Layers))
	}

	out := string(docker(t, "run", "--rm", dev, "version"))
	if !strings.Contains(out, "version:          "+version+"\n") {
		t.Fatalf("docker run --rm %s version:\n%s\nwant version %s", dev, out, version)
	}
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil { //nolint:gosec // G204: the repository root
		if want := "commit:           " + strings.TrimSpace(string(head)) + "\n"; !strings.Contains(out, want) {
			t.Fatalf("docker run --rm %s version:\n%s\nwant %q", dev, out, want)
		}
	}
	if out := string(docker(t, "run", "--rm", dev, "token", "mint", "--offline", "--role", "operator", "--subject", "imagetest", "--data", "/var/lib/sandgate")); strings.Count(out, ".") != 2 {
		t.Fatalf("the image's user cannot mint into its data dir: %q", out)
	}

	want, err := os.ReadFile(hostCA)
	if err != nil {
		t.Logf("this host has no %s: the image carries no CA bundle (not checked)", hostCA)
		return
	}
	name := fmt.Sprintf("sandgate-imagetest-%d", time.Now().UnixNano())
	docker(t, "create", "--name", name, dev)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "--force", name).Run() }) //nolint:gosec // G204: the test's own container
	tr := tar.NewReader(bytes.NewReader(docker(t, "cp", name+":"+hostCA, "-")))
	if _, err := tr.Next(); err != nil {
		t.Fatalf("docker cp %s: %v", hostCA, err)
	}
	got, err := io.ReadAll(tr)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the image's %s (%d bytes, %v) is not the build host's (%d bytes)", hostCA, len(got), err, len(want))
	}
}
