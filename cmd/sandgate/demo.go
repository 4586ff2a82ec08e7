package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sandgate/jobspec"
	"sandgate/policies"
)

// simulatedBanner is printed on every demo start: nothing here touches a cluster.
const simulatedBanner = `
################################################################################
#  SIMULATED CLUSTER: no Nomad is contacted and no command is executed.         #
#  The worker below is a built-in description (linux, healthy, idle, enrolled). #
#  This demo exercises the policy core: render -> admission -> decision, with   #
#  the embedded bundle. 'sandgate dev' (make run) starts the whole gateway.     #
################################################################################
`

func newDemoCmd() *cobra.Command {
	var policyDir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Render sample sandboxes for a simulated worker and show the policy's decisions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprint(out, simulatedBanner)
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "policy bundle revision %s, %d annotated rules\n\n", engine.Revision(), len(engine.Rules()))
			s := engine.Settings()
			cases := []struct {
				title      string
				req        sandboxRequest
				enrollment string
				mutate     func(job map[string]any)
			}{
				{"strict sandbox, no network", sandboxRequest{Node: "sim-worker-1", Profile: "strict", Network: "none"}, "sandbox", nil},
				{"workspace sandbox with egress", sandboxRequest{Node: "sim-worker-2", Profile: "workspace", Network: "egress"}, "sandbox+egress", nil},
				{"egress on a worker not enrolled for egress", sandboxRequest{Node: "sim-worker-1", Profile: "strict", Network: "egress"}, "sandbox", nil},
				{"the strict job, tampered with: privileged = true", sandboxRequest{Node: "sim-worker-1"}, "sandbox", func(job map[string]any) {
					taskConfig(job)["privileged"] = true
				}},
				{"the strict job, tampered with: the docker socket mounted", sandboxRequest{Node: "sim-worker-1"}, "sandbox", func(job map[string]any) {
					c := taskConfig(job)
					c["mount"] = append(c["mount"].([]any), map[string]any{"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"})
				}},
			}
			for _, c := range cases {
				if err := demoCase(cmd, out, engine, s, c.title, c.req, c.enrollment, c.mutate); err != nil {
					return err
				}
			}
			fmt.Fprintln(out, "\nTry: sandgate render --node w1 --admission-input | sandgate policy eval --entrypoint admission --input -")
			return nil
		},
	}
	addPolicyDirFlag(cmd, &policyDir)
	return cmd
}

func demoCase(cmd *cobra.Command, out io.Writer, engine *policies.Engine, s policies.Settings, title string,
	req sandboxRequest, enrollment string, mutate func(map[string]any),
) error {
	spec, jobJSON, err := renderSandbox(s, req, time.Now().UTC().Truncate(time.Second))
	if err != nil {
		return err
	}
	if mutate != nil {
		var job map[string]any
		if err := json.Unmarshal(jobJSON, &job); err != nil {
			return err
		}
		mutate(job)
		if jobJSON, err = json.Marshal(job); err != nil {
			return err
		}
	}
	in := jobspec.AdmissionInput(spec, jobJSON, jobspec.WorkerFacts(req.Node, spec.Arch, enrollment, s), policies.Budget{Limits: s.NodeBudgetDefault}, policies.PrincipalFacts{Sub: "demo", Role: "operator"}, jobspec.NomadMounts(s))
	v, err := in.Value()
	if err != nil {
		return err
	}
	d, err := engine.Decide(cmd.Context(), policies.Admission, v)
	if err != nil {
		return err
	}
	verdict := "ADMITTED"
	if !d.Allow {
		verdict = "DENIED   [" + strings.Join(d.RuleIDs(), ", ") + "]"
	}
	fmt.Fprintf(out, "%-58s %s  (job %s, %d µs)\n", title, verdict, spec.JobID(), d.Duration.Microseconds())
	for _, v := range d.Violations {
		fmt.Fprintf(out, "    %s: %s\n", v.Rule, v.Msg)
	}
	return nil
}

// taskConfig returns the docker config of the job's single task.
func taskConfig(job map[string]any) map[string]any {
	return job["TaskGroups"].([]any)[0].(map[string]any)["Tasks"].([]any)[0].(map[string]any)["Config"].(map[string]any)
}
