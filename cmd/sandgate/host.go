package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"sandgate/gateway/client"
)

func newHostCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "host",
		Short: "List, enroll, unenroll and freeze, reserve or drain worker nodes (operators)",
		Long: `Manage the Nomad client nodes that host sandboxes through a running gateway
(--addr or ` + envAddr + `) with an operator token. Enrollment is a policy
decision: a control-plane node (P2), or egress on a node without the
isolation bundle (I5), is refused with its rule id and exit status 3.`,
	}
	a := addAPIFlags(cmd)
	cmd.AddCommand(newHostListCmd(a), newHostEnrollCmd(a), newHostUnenrollCmd(a), newHostStateCmd(a))
	return cmd
}

// nomadText is "ready", or "ready,ineligible,drain".
func nomadText(n client.HostNomad) string {
	parts := []string{orDash(n.Status)}
	if n.Eligibility != "" && n.Eligibility != "eligible" {
		parts = append(parts, n.Eligibility)
	}
	if n.Drain {
		parts = append(parts, "drain")
	}
	return strings.Join(parts, ",")
}

func percent(u *client.HostUsage, mem bool) string {
	if u == nil {
		return "-"
	}
	v := u.DiskPercent
	if mem {
		v = u.MemoryPercent
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// budgetFigures are a node's live sandboxes, CPU and memory as "used/limit"
// (the live count alone for a node without a budget).
func budgetFigures(live int64, b client.HostBudget) (sbx, cpu, mem string) {
	l, u := b.Limits, b.Used
	if l == (client.BudgetLimits{}) {
		return strconv.FormatInt(live, 10), "-", "-"
	}
	return fmt.Sprintf("%d/%d", u.Sandboxes, l.MaxSandboxes), fmt.Sprintf("%d/%d", u.CPUMHz, l.CPUMHz), fmt.Sprintf("%d/%d", u.MemoryMB, l.MemoryMB)
}

// budgetText is "1/10 sbx, 500/8000 MHz, 512/16384 MB" (used/limit), "-"
// for a node without a budget.
func budgetText(b client.HostBudget) string {
	l, u := b.Limits, b.Used
	if l == (client.BudgetLimits{}) {
		return "-"
	}
	return fmt.Sprintf("%d/%d sbx, %d/%d MHz, %d/%d MB", u.Sandboxes, l.MaxSandboxes, u.CPUMHz, l.CPUMHz, u.MemoryMB, l.MemoryMB)
}

// printHost writes one host as key: value lines.
func printHost(w io.Writer, h client.Host) error {
	usage := "unknown (Nomad's node stats could not be read)"
	if h.Usage != nil {
		usage = fmt.Sprintf("memory %s%%, disk %s%%", percent(h.Usage, true), percent(h.Usage, false))
	}
	cp := ""
	if h.ControlPlane {
		cp = "yes"
	}
	return fields(w, "name", h.Name, "id", h.ID, "datacenter", h.Datacenter, "enrollment", h.Enrollment,
		"state", h.State, "nomad", nomadText(h.Nomad), "control plane", cp, "platform", h.OS+"/"+h.Architecture,
		"isolation", h.Isolation, "usage", usage, "budget", budgetText(h.Budget),
		"sandboxes", strconv.FormatInt(h.LiveSandboxes, 10), "updated", h.UpdatedAt)
}

func newHostListCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the nodes with their enrollment, state, usage and budget",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			hosts, err := c.ListHosts(cmd.Context())
			if err != nil {
				return apiError(a, err)
			}
			w := cmd.OutOrStdout()
			if a.json() {
				return printJSON(w, map[string]any{"hosts": hosts})
			}
			if len(hosts) == 0 {
				fmt.Fprintln(w, "no nodes: Nomad lists no client node and none is enrolled")
				return nil
			}
			if a.wide() {
				t := newTable(w, "NAME", "ENROLLMENT", "STATE", "NOMAD", "ARCH", "MEM%", "DISK%", "SANDBOXES", "BUDGET")
				for _, h := range hosts {
					t.row(h.Name, h.Enrollment, h.State, nomadText(h.Nomad), h.Architecture,
						percent(h.Usage, true), percent(h.Usage, false), strconv.FormatInt(h.LiveSandboxes, 10), budgetText(h.Budget))
				}
				return t.flush()
			}
			// 100 columns: the budget as used/limit figures without units,
			// the architecture in -o wide; the name and Nomad's status are
			// cut to fit.
			t := newTable(w, "NAME", "ENROLLMENT", "STATE", "NOMAD", "MEM%", "DISK%", "SANDBOXES", "CPU MHZ", "MEMORY MB").fit(maxTableWidth, 0, 3, 1)
			for _, h := range hosts {
				sbx, cpu, mem := budgetFigures(h.LiveSandboxes, h.Budget)
				t.row(h.Name, h.Enrollment, h.State, nomadText(h.Nomad), percent(h.Usage, true), percent(h.Usage, false), sbx, cpu, mem)
			}
			return t.flush()
		},
	}
}

func newHostEnrollCmd(a *apiFlags) *cobra.Command {
	var (
		egress                      bool
		maxSandboxes, cpu, memoryMB int64
	)
	cmd := &cobra.Command{
		Use:   "enroll NODE [--egress] [--max-sandboxes N] [--cpu MHZ] [--memory MB]",
		Short: "Enroll a node for sandboxes (again: update its budget; its state is kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			req := client.EnrollRequest{Egress: &egress}
			f := cmd.Flags()
			var b client.BudgetRequest
			if f.Changed("max-sandboxes") {
				b.MaxSandboxes = &maxSandboxes
			}
			if f.Changed("cpu") {
				b.CPUMHz = &cpu
			}
			if f.Changed("memory") {
				b.MemoryMB = &memoryMB
			}
			if b != (client.BudgetRequest{}) {
				req.Budget = &b
			}
			h, err := c.Enroll(cmd.Context(), args[0], req)
			if err != nil {
				return apiError(a, err)
			}
			if a.json() {
				return printJSON(cmd.OutOrStdout(), h)
			}
			return printHost(cmd.OutOrStdout(), h)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&egress, "egress", false, "allow egress sandboxes (the node must declare the isolation bundle, I5)")
	f.Int64Var(&maxSandboxes, "max-sandboxes", 0, "budget: concurrent sandboxes (default from the policy)")
	f.Int64Var(&cpu, "cpu", 0, "budget: total CPU in MHz (default from the policy)")
	f.Int64Var(&memoryMB, "memory", 0, "budget: total memory in MB (default from the policy)")
	return cmd
}

// printChange writes a host after an unenrollment or a state change.
func printChange(cmd *cobra.Command, a *apiFlags, ch client.HostChange) error {
	w := cmd.OutOrStdout()
	if a.json() {
		return printJSON(w, ch)
	}
	if err := printHost(w, ch.Host); err != nil {
		return err
	}
	if len(ch.Reclaimed) == 0 {
		fmt.Fprintln(w, "reclaimed:  none")
		return nil
	}
	fmt.Fprintf(w, "reclaimed:  %s\n", strings.Join(ch.Reclaimed, ", "))
	return nil
}

func newHostUnenrollCmd(a *apiFlags) *cobra.Command {
	var reclaim bool
	cmd := &cobra.Command{
		Use:   "unenroll NODE [--reclaim]",
		Short: "Unenroll a node; --reclaim destroys its live sandboxes first (R2)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ch, err := c.Unenroll(cmd.Context(), args[0], reclaim)
			if err != nil {
				return withHint(apiError(a, err), "sandboxes_live",
					"sandgate host unenroll "+args[0]+" --reclaim destroys them first, then unenrolls (R2)")
			}
			return printChange(cmd, a, ch)
		},
	}
	cmd.Flags().BoolVar(&reclaim, "reclaim", false, "destroy the node's live sandboxes first")
	return cmd
}

var hostStates = []string{client.HostActive, client.HostFrozen, client.HostReserved, client.HostDraining}

func newHostStateCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "state NODE active|frozen|reserved|draining",
		Short: "Set a node's state: frozen and reserved take no new sandboxes, draining reclaims them (R2)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(hostStates, args[1]) {
				return fmt.Errorf("state %q: want one of %s", args[1], strings.Join(hostStates, ", "))
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ch, err := c.SetHostState(cmd.Context(), args[0], args[1])
			if err != nil {
				return apiError(a, err)
			}
			return printChange(cmd, a, ch)
		},
	}
}
