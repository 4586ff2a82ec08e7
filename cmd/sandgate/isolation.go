package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"sandgate/policies"
	"sandgate/render/isolation"
)

func newIsolationCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "isolation",
		Short: "The host isolation bundle of egress workers (rules I1-I4, docs/runbook.md)",
	}
	cmd.AddCommand(newIsolationRenderCmd())
	return cmd
}

func newIsolationRenderCmd() *cobra.Command {
	var (
		cfg         = isolation.DefaultConfig()
		policyDir   string
		policyInput bool
	)
	cmd := &cobra.Command{
		Use:   "render [flags] > sandgate-isolation.sh",
		Short: "Print the host isolation script for an egress worker, once the policy allowed it",
		Long: `Render the bash script that isolates egress sandboxes on one worker, and print it.

The script has three modes: --verify (change nothing; exit 0 only when every
rule and the network are in place exactly), --apply (refuse on a control plane
when ANY indicator is present; otherwise add what is missing, idempotently)
and --remove (delete exactly what --apply adds). With --firewall-only it
manages the iptables rules but not the Docker network. It creates one Docker
bridge network (--bridge; inter-container traffic off, IPv6 off) and one
iptables chain, jumped to from DOCKER-USER for traffic from that bridge, that
drops traffic to private, CGNAT, link-local/metadata, multicast and reserved
space, every --overlay, the --nomad-ports (tcp and udp) and the --ssh-ports;
plus one INPUT rule that keeps the bridge off the host. Every rule's comment
starts with "sandgate-isolation".

--bridge must be the docker network the rendered egress jobs use (policy data
networks.egress.network_mode). Before printing, the plan is decided by the
policy entrypoint "isolation" (data.sandgate.isolation.decision); a deny
prints the violations on stderr, nothing on stdout, and exits 3. With
--policy-input the command prints that decision's input document instead, to
replay with 'sandgate policy eval --entrypoint isolation --input FILE'.

Exit status: 0 printed, 3 denied by policy, 1 error (bad flags, bundle).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engine, err := loadEngine(cmd, policyDir)
			if err != nil {
				return err
			}
			st := engine.Settings()
			if want := st.Networks["egress"].NetworkMode; cfg.Bridge != want {
				return fmt.Errorf("--bridge %q is not the docker network the egress jobs use (policy data networks.egress.network_mode = %q)", cfg.Bridge, want)
			}
			// The sandboxes' resolvers are the egress jobs' dns_servers (H7)
			// unless --resolver says otherwise.
			if !cmd.Flags().Changed("resolver") && len(st.Networks["egress"].DNSServers) > 0 {
				cfg.Resolvers = st.Networks["egress"].DNSServers
			}
			// The script checks the indicators the policy knows (P2), plus the
			// names given here.
			cfg.ControlPlaneMeta = st.Placement.ControlPlane.Meta
			cfg.ControlPlaneNames = mergeNames(st.Placement.ControlPlane.NodeNames, cfg.ControlPlaneNames)
			plan, script, err := isolation.Render(cfg)
			if err != nil {
				return err
			}
			in := &policies.IsolationInput{Plan: plan}
			if policyInput {
				doc, err := json.Marshal(in)
				if err != nil {
					return err
				}
				return writeIndented(cmd, doc)
			}
			v, err := in.Value()
			if err != nil {
				return err
			}
			d, err := engine.Decide(cmd.Context(), policies.Isolation, v)
			if err != nil {
				return fmt.Errorf("isolation decision %s (revision %s) failed, which is a deny: %w", d.ID, d.Revision, err)
			}
			if !d.Allow {
				printDenial(cmd.ErrOrStderr(), d)
				return errDenied
			}
			_, err = cmd.OutOrStdout().Write(script)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Bridge, "bridge", cfg.Bridge, "docker network and Linux bridge name (<= 15 characters); must be the egress jobs' network_mode")
	f.StringVar(&cfg.Subnet, "subnet", cfg.Subnet, "the network's IPv4 subnet; its first address is the gateway")
	f.StringArrayVar(&cfg.Overlays, "overlay", nil, "cluster overlay (e.g. WireGuard) IPv4 CIDR the sandboxes never reach (repeatable)")
	f.IntSliceVar(&cfg.NomadPorts, "nomad-ports", cfg.NomadPorts, "Nomad's HTTP, RPC and Serf ports, in that order (tcp and udp dropped); a listener on RPC or Serf marks a control plane")
	f.IntSliceVar(&cfg.SSHPorts, "ssh-ports", cfg.SSHPorts, "SSH ports the sandboxes never reach (tcp)")
	f.StringArrayVar(&cfg.Resolvers, "resolver", cfg.Resolvers, "public IPv4 DNS resolver of the sandboxes (repeatable; default: policy data networks.egress.dns_servers); private and special addresses are refused")
	f.StringArrayVar(&cfg.ControlPlaneNames, "control-plane-name", nil, "node name of a control-plane host; the script refuses to run on it (repeatable)")
	f.StringVar(&cfg.NomadConfigDir, "nomad-config-dir", cfg.NomadConfigDir, "the Nomad agent's configuration directory, scanned for a server block and control-plane meta")
	f.BoolVar(&policyInput, "policy-input", false, "print the isolation decision's input document (the plan) instead of the script")
	addPolicyDirFlag(cmd, &policyDir)
	return cmd
}

// printDenial writes a deny: the decision, then one line per violation.
func printDenial(w io.Writer, d policies.Decision) {
	fmt.Fprintf(w, "sandgate: the isolation policy denied this plan (decision %s, revision %s):\n", d.ID, d.Revision)
	for _, v := range d.Violations {
		fmt.Fprintf(w, "  %s: %s\n", v.Rule, v.Msg)
	}
}

// mergeNames is a then b without duplicates, in order.
func mergeNames(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, n := range append(append([]string(nil), a...), b...) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
