package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sandgate/nomad/localnomad"
	"sandgate/policies"
	"sandgate/policies/datapatch"
	"sandgate/store"
)

// localWorker is the client node `sandgate dev --nomad-agent` starts and
// enrolls.
const localWorker = "worker-1"

// localNomad is a real Nomad pair started for `sandgate dev --nomad-agent`
// (make run-nomad), with the bundle fitted to its node and image.
type localNomad struct {
	cluster   *localnomad.Cluster
	dir       string // the cluster's files and the fitted bundle; removed by close
	policyDir string // the bundle with the local data overlay
	node      store.Node
}

// startLocalNomad starts a server-only and a client-only agent from bin
// below dataDir/nomad, checks that image is in the local Docker engine, and
// writes the bundle (policyDir, or the embedded one when empty) with the
// data overlay for the node's architecture and the image, which it prints
// to out. On an error nothing is left running.
func startLocalNomad(ctx context.Context, bin, image, dataDir, policyDir string, out io.Writer) (*localNomad, error) {
	switch {
	case os.Geteuid() != 0:
		return nil, errors.New("--nomad-agent: a Nomad client with the docker driver needs root (it mounts the alloc dirs); run it as root")
	case image == "":
		return nil, errors.New("--nomad-agent needs --image: a sandbox image present in the local Docker engine (make run-nomad builds one)")
	}
	if b, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", image).CombinedOutput(); err != nil { //nolint:gosec // G204: the image the operator named, as one argument
		return nil, fmt.Errorf("--image %s is not in the local Docker engine (%s); build it with deploy/images/build.sh busybox=%s, or run make run-nomad",
			image, strings.TrimSpace(string(b)), image)
	}
	dir := filepath.Join(dataDir, "nomad")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "sandgate dev: starting a local Nomad (%s): a server-only agent %q and a client-only agent %q below %s\n",
		bin, localnomad.ServerName, localWorker, dir)
	c, err := localnomad.Start(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	l := &localNomad{cluster: c, dir: dir, policyDir: filepath.Join(dir, "policies"),
		node: store.Node{Name: localWorker, Enrollment: "sandbox", State: "active"}}
	node, err := func() (string, error) {
		if _, err := c.StartClient(ctx, localWorker); err != nil {
			return "", err
		}
		n, err := localnomad.WaitNode(ctx, c.API, localWorker)
		if err != nil {
			return "", err
		}
		return n.Attributes["cpu.arch"], nil
	}()
	if err == nil {
		err = l.writeBundle(policyDir, node, image, out)
	}
	if err != nil {
		l.close(io.Discard)
		return nil, err
	}
	return l, nil
}

// localDataOverlay is the merge patch (RFC 7386) that fits the bundle's
// data to a local node of architecture arch and one local image: P1's
// architectures and H11's images. Nothing else of the bundle changes.
func localDataOverlay(arch, image string) map[string]any {
	return map[string]any{"sandgate": map[string]any{"config": map[string]any{
		"placement": map[string]any{"allowed_architectures": []any{arch}},
		"images":    map[string]any{"default": image, "allowed": []any{image}},
	}}}
}

// writeBundle writes the bundle of src (the embedded one when empty) to
// l.policyDir with the local data overlay applied, and prints the overlay.
func (l *localNomad) writeBundle(src, arch, image string, out io.Writer) error {
	if arch == "" {
		return fmt.Errorf("node %s reports no cpu.arch attribute", localWorker)
	}
	fsys := policies.EmbeddedBundle()
	if src != "" {
		fsys = os.DirFS(src)
	}
	overlay := localDataOverlay(arch, image)
	patch, err := json.Marshal(overlay)
	if err != nil {
		return err
	}
	if err := writePatchedBundle(fsys, l.policyDir, patch); err != nil {
		return err
	}
	shown, _ := json.MarshalIndent(overlay, "  ", "  ")
	fmt.Fprintf(out, "sandgate dev: the bundle's data is overlaid for this node (%s) and the local image; the bundle is in %s:\n  %s\n",
		arch, l.policyDir, shown)
	return nil
}

// writePatchedBundle copies every file of fsys into dir, data.json with the
// merge patch applied.
func writePatchedBundle(fsys fs.FS, dir string, patch []byte) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		if strings.HasSuffix(p, ".go") {
			return nil // a source tree's engine code is no part of the bundle
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if p == "data.json" {
			if b, err = datapatch.Apply(b, patch); err != nil {
				return err
			}
		}
		return os.WriteFile(dst, b, 0o600) //nolint:gosec // G703: below the dev data dir
	})
}

// close purges every job, stops the agents, unmounts what the client left
// mounted, removes the cluster's containers and its directory.
func (l *localNomad) close(out io.Writer) {
	fmt.Fprintf(out, "sandgate dev: stopping the local Nomad: purging its jobs, stopping the agents, removing %s\n", l.dir)
	l.cluster.Close()
	if err := os.RemoveAll(l.dir); err != nil {
		fmt.Fprintf(out, "sandgate dev: could not remove %s: %v\n", l.dir, err)
	}
}
