package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway"
	"sandgate/policies"
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

This command asks no Nomad: the node is described as a healthy, idle,
enrolled worker (status ready, eligible, not draining, operator state active,
the bundle's first allowed OS and architecture, 0 % memory and disk use, no
live sandbox, the bundle's default node budget). Its enrollment is "sandbox",
or "sandbox+egress" for --network egress unless --enrollment says otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			s := engine.Settings()
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
			node := gateway.WorkerFacts(req.Node, spec.Arch, enrollment, s)
			budget := policies.Budget{Limits: s.NodeBudgetDefault}
			in := gateway.AdmissionInput(spec, jobJSON, node, budget, principal)
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
	f.StringVar(&principal, "principal", "operator:cli", "principal recorded in --admission-input")
	f.BoolVar(&asAdmissionInput, "admission-input", false, "print the admission input document instead of the job")
	addPolicyDirFlag(cmd, &policyDir)
	_ = cmd.MarkFlagRequired("node")
	return cmd
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
