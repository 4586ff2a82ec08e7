package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sandgate/jobspec"
	"sandgate/nodefacts"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

func newRenderCmd() *cobra.Command {
	var (
		req              sandboxRequest
		enrollment       string
		principal        string
		policyDir        string
		asAdmissionInput bool
	)
	cmd := &cobra.Command{
		Use:   "render --node NAME [flags]",
		Short: "Print the hardened Nomad job (or its admission input) for one sandbox",
		Long: `Render the Nomad job sandgate would submit for one sandbox, with the
defaults of the policy bundle's data, and print it as JSON.

With --admission-input it prints instead the whole admission input document
(sandbox, job, node, budget) so a reviewer can edit it and replay it with
'sandgate policy eval --entrypoint admission --input FILE'.

With NOMAD_ADDR set (and NOMAD_TOKEN etc., as for the nomad CLI) the node's
facts are read from that Nomad: its status, eligibility, drain, attributes
(the job is pinned to its real architecture), meta, memory and disk use, and
whether a Nomad server runs on it. A Nomad that does not answer is an error.
The operator's side (enrollment, operator state "active", no live sandbox,
the default node budget) is not read: the gateway's store is not opened.

Without NOMAD_ADDR no Nomad is asked: the node is described as a healthy,
idle, enrolled worker (status ready, eligible, not draining, the bundle's
first allowed OS and architecture, 0 % memory and disk use).

The enrollment is "sandbox", or "sandbox+egress" for --network egress,
unless --enrollment says otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			s := engine.Settings()
			var live *liveNode
			if ncfg, ok := nomadFromEnv(); ok {
				ncfg.JobPrefix = s.Prefix
				if live, err = readLiveNode(cmd.Context(), ncfg, req.Node); err != nil {
					return err
				}
				if req.Arch == "" {
					req.Arch = live.node.Attributes["cpu.arch"]
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "node facts of %s read from Nomad at %s\n", req.Node, ncfg.Address)
			}
			spec, jobJSON, err := renderSandbox(s, req, time.Now().UTC().Truncate(time.Second))
			if err != nil {
				return err
			}
			if !asAdmissionInput {
				return writeIndented(cmd, jobJSON)
			}
			if enrollment == "" {
				enrollment = "sandbox"
				if req.Network == "egress" {
					enrollment = "sandbox+egress"
				}
			}
			node := jobspec.WorkerFacts(req.Node, spec.Arch, enrollment, s)
			if live != nil {
				node = live.facts(enrollment)
			}
			budget := policies.Budget{Limits: s.NodeBudgetDefault}
			who, err := principalFacts(principal)
			if err != nil {
				return err
			}
			in := jobspec.AdmissionInput(spec, jobJSON, node, budget, who, jobspec.NomadMounts(s))
			doc, err := json.Marshal(in)
			if err != nil {
				return err
			}
			return writeIndented(cmd, doc)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Node, "node", "", "Nomad node name the sandbox is pinned to (required)")
	f.StringVar(&req.Profile, "profile", "strict", "hardening profile: strict or workspace")
	f.StringVar(&req.Network, "network", "none", "network: none or egress")
	f.DurationVar(&req.TTL, "ttl", 0, "time to live (default: the bundle's default TTL, 1h)")
	f.IntVar(&req.CPUMHz, "cpu", 0, "CPU in MHz (default: the bundle's default)")
	f.IntVar(&req.MemoryMB, "memory", 0, "memory in MB (default: the bundle's default)")
	f.StringVar(&req.Image, "image", "", "docker image (default: the bundle's default image)")
	f.StringVar(&req.Arch, "arch", "", "node CPU architecture (default: the bundle's first allowed one)")
	f.StringVar(&req.ID, "id", "", "sandbox id (default: a random one)")
	f.StringVar(&enrollment, "enrollment", "", "node enrollment for --admission-input: none, sandbox or sandbox+egress")
	f.StringVar(&principal, "principal", "operator:cli", "principal of --admission-input, ROLE:SUB (operator or agent)")
	f.BoolVar(&asAdmissionInput, "admission-input", false, "print the admission input document instead of the job")
	addPolicyDirFlag(cmd, &policyDir)
	_ = cmd.MarkFlagRequired("node")
	return cmd
}

// principalFacts parses ROLE:SUB.
func principalFacts(s string) (policies.PrincipalFacts, error) {
	role, sub, ok := strings.Cut(s, ":")
	if !ok || sub == "" || (role != "operator" && role != "agent") {
		return policies.PrincipalFacts{}, fmt.Errorf("--principal %q: want operator:SUB or agent:SUB", s)
	}
	return policies.PrincipalFacts{Sub: sub, Role: role}, nil
}

// liveNode is one node as a Nomad reports it.
type liveNode struct {
	node         nomad.Node
	controlPlane bool
	usage        nomad.Usage
}

// readLiveNode reads the node called name, its usage and the server
// members from the Nomad of cfg.
func readLiveNode(ctx context.Context, cfg nomad.Config, name string) (*liveNode, error) {
	c, err := nomad.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("nomad client: %w", err)
	}
	n, err := c.Node(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read node %s from Nomad at %s: %w", name, cfg.Address, err)
	}
	servers, err := c.Servers(ctx)
	if err != nil {
		return nil, fmt.Errorf("read Nomad's server members: %w", err)
	}
	u, err := c.NodeUsage(ctx, n.ID)
	if err != nil {
		return nil, fmt.Errorf("read the usage of node %s: %w", name, err)
	}
	return &liveNode{node: n, controlPlane: nomad.Colocated(n, servers), usage: u}, nil
}

// facts are the admission input's node: Nomad's facts, the given
// enrollment, operator state active.
func (l *liveNode) facts(enrollment string) policies.NodeFacts {
	return nodefacts.Of(l.node, l.controlPlane, &store.Node{Name: l.node.Name, Enrollment: enrollment, State: "active"}, &l.usage)
}

// writeIndented prints a JSON document indented, with a final newline.
func writeIndented(cmd *cobra.Command, doc []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := cmd.OutOrStdout().Write(buf.Bytes())
	return err
}

// addPolicyDirFlag adds --policy-dir to a command.
func addPolicyDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "policy-dir", "", "load the policy bundle from this directory instead of the embedded copy")
}

// loadEngine compiles the embedded bundle, or the one in dir.
func loadEngine(cmd *cobra.Command, dir string) (*policies.Engine, error) {
	e, err := policies.New(cmd.Context(), policies.Config{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("load policy bundle: %w", err)
	}
	return e, nil
}
