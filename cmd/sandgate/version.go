package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"sandgate/policies"
)

// version and commit are set at build time:
//
//	go build -ldflags "-X main.version=1.2.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/sandgate
//
// Without -X main.commit the commit is the one Go stamped into the binary
// (vcs.revision, when built inside a git checkout).
var (
	version = "dev"
	commit  = ""
)

// versionInfo is what `sandgate version` prints.
type versionInfo struct {
	Version string `json:"version"`
	// Commit is the git revision the binary was built from, "" when unknown;
	// Modified says the checkout had uncommitted changes.
	Commit   string `json:"commit"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	// BundleRevision and BundleDigest identify the policy bundle embedded in
	// the binary (a gateway started with --policy-dir serves another one:
	// GET /v1/policy says which).
	BundleRevision string `json:"bundle_revision"`
	BundleDigest   string `json:"bundle_digest"`
}

// buildVersion reads the version of this binary.
func buildVersion() (versionInfo, error) {
	v := versionInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok && commit == "" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	b := policies.EmbeddedBundle()
	raw, err := fs.ReadFile(b, ".manifest")
	if err != nil {
		return v, fmt.Errorf("the embedded bundle: %w", err)
	}
	var m struct{ Revision string }
	if err := json.Unmarshal(raw, &m); err != nil {
		return v, fmt.Errorf("the embedded bundle's .manifest: %w", err)
	}
	v.BundleRevision = m.Revision
	if v.BundleDigest, err = policies.BundleDigest(b); err != nil {
		return v, fmt.Errorf("the embedded bundle: %w", err)
	}
	return v, nil
}

// writeVersion writes v for a person.
func writeVersion(w io.Writer, v versionInfo) error {
	c := v.Commit
	switch {
	case c == "":
		c = "unknown (built outside a git checkout without -ldflags -X main.commit)"
	case v.Modified:
		c += " (with uncommitted changes)"
	}
	return fields(w, "version", v.Version, "commit", c, "go", v.Go,
		"bundle revision", v.BundleRevision, "bundle digest", v.BundleDigest)
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json]",
		Short: "Print the version, the commit and the embedded policy bundle's revision",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != outputTable && output != outputJSON {
				return fmt.Errorf("-o/--output must be table or json, not %q", output)
			}
			v, err := buildVersion()
			if err != nil {
				return err
			}
			if output == outputJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return writeVersion(cmd.OutOrStdout(), v)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table or json")
	return cmd
}

// addVersionFlag gives root --version (and -v), printing what `sandgate
// version` prints.
func addVersionFlag(root *cobra.Command) {
	addTemplateFuncs()
	root.Version = version
	root.Flags().BoolP("version", "v", false, "print the version, the commit and the embedded policy bundle's revision")
	root.SetVersionTemplate(`{{versionText}}`)
}

// versionText is the version as writeVersion writes it (the --version
// template).
func versionText() (string, error) {
	v, err := buildVersion()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = writeVersion(&b, v)
	return b.String(), err
}
