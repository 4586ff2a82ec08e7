package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sandgate/gateway/client"
	"sandgate/jobspec"
	"sandgate/policies"
	"sandgate/render"
)

// sandboxRequest is what a caller asks for; zero fields take the policy
// data's defaults.
type sandboxRequest = jobspec.Request

// renderSandbox fills the spec of req with the bundle's defaults, renders
// it, and returns the spec and the job as the JSON that is submitted.
func renderSandbox(s policies.Settings, req sandboxRequest, now time.Time) (render.SandboxSpec, []byte, error) {
	spec, _, jobJSON, err := jobspec.Render(s, req, now)
	return spec, jobJSON, err
}

func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Create, inspect, run commands in, copy files to and from, and destroy sandboxes through the REST API",
		Long: `Talk to a running gateway (--addr or ` + envAddr + `) with an operator, agent
or session token (--token, --token-file or ` + envToken + `). Tables by
default; -o json prints the API objects for scripts.

Exit status: 0 on success, 3 when a policy denied the request (the rule ids
and the decision id are printed), 1 on any other failure. exec exits with
the command's own exit status.

Files: cp copies one file in (cp LOCAL ID:/workspace/PATH) or out
(cp ID:/workspace/PATH LOCAL), ls lists a directory, rm removes a path.`,
	}
	a := addAPIFlags(cmd)
	cmd.AddCommand(newSandboxCreateCmd(a), newSandboxListCmd(a), newSandboxGetCmd(a),
		newSandboxDestroyCmd(a), newSandboxExtendCmd(a), newSandboxExecCmd(a), newSandboxLogsCmd(a),
		newSandboxCpCmd(a), newSandboxLsCmd(a), newSandboxRmCmd(a))
	return cmd
}

// printSandbox writes one sandbox as -o asks; the table shows the
// session token last, when the sandbox carries one (a create's answer).
func printSandbox(w io.Writer, a *apiFlags, s client.Sandbox) error {
	if a.json() {
		return printJSON(w, s)
	}
	return fields(w,
		"id", s.ID, "state", s.State, "node", s.Node, "profile", s.Profile, "network", s.Network,
		"image", s.Image, "cpu", fmt.Sprintf("%d MHz", s.CPUMHz), "memory", fmt.Sprintf("%d MB", s.MemoryMB),
		"principal", s.Principal, "created", s.CreatedAt, "expires", s.ExpiresAt, "ceiling", s.CeilingAt,
		"labels", labelsText(s.Labels), "ended", s.EndedAt, "end reason", s.EndReason, "last error", s.LastError,
		"token", s.Token)
}

func newSandboxListCmd(a *apiFlags) *cobra.Command {
	var (
		q      client.ListQuery
		labels []string
	)
	cmd := &cobra.Command{
		Use:   "list [--all] [--state S,...] [--label K=V] [--node N] [--principal P] [--limit N [--cursor C]]",
		Short: "List live sandboxes (agents: their own); --all includes ended and failed ones",
		Long: "List sandboxes, every page unless --limit or --cursor asks for one page (its next cursor is\n" +
			"printed last, or returned as next_cursor with -o json).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			for _, kv := range labels {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--label %q: want KEY=VALUE", kv)
				}
				if q.Labels == nil {
					q.Labels = map[string]string{}
				}
				q.Labels[k] = v
			}
			onePage := q.Limit > 0 || q.Cursor != ""
			var page client.SandboxPage
			if onePage {
				page, err = c.ListSandboxPage(cmd.Context(), q)
			} else {
				q.Limit = 1000
				for {
					var p client.SandboxPage
					if p, err = c.ListSandboxPage(cmd.Context(), q); err != nil {
						break
					}
					page.Sandboxes = append(page.Sandboxes, p.Sandboxes...)
					if p.NextCursor == "" {
						break
					}
					q.Cursor = p.NextCursor
				}
			}
			if err != nil {
				return apiError(a, err)
			}
			w := cmd.OutOrStdout()
			list := page.Sandboxes
			if list == nil {
				list = []client.Sandbox{}
			}
			if a.json() {
				out := map[string]any{"sandboxes": list}
				if page.NextCursor != "" {
					out["next_cursor"] = page.NextCursor
				}
				return printJSON(w, out)
			}
			if len(list) == 0 {
				if q.All || len(q.States) > 0 {
					fmt.Fprintln(w, "no sandboxes")
				} else {
					fmt.Fprintln(w, "no live sandboxes (--all includes ended and failed ones)")
				}
				return nil
			}
			var t *table
			if a.wide() {
				t = newTable(w, "ID", "STATE", "NODE", "PROFILE", "NETWORK", "IMAGE", "PRINCIPAL", "CREATED", "EXPIRES", "LABELS")
				for _, s := range list {
					t.row(s.ID, s.State, s.Node, s.Profile, s.Network, s.Image, s.Principal, s.CreatedAt, s.ExpiresAt, labelsText(s.Labels))
				}
			} else {
				// 100 columns: the image, creation time and labels are in
				// -o wide; the node and principal are cut to fit.
				now := time.Now()
				t = newTable(w, "ID", "STATE", "NODE", "PROFILE/NETWORK", "PRINCIPAL", "EXPIRES").fit(maxTableWidth, 2, 4)
				for _, s := range list {
					t.row(s.ID, s.State, s.Node, s.Profile+"/"+s.Network, s.Principal, ago(s.ExpiresAt, now))
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			if page.NextCursor != "" {
				fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&q.All, "all", false, "include ended and failed sandboxes")
	f.StringSliceVar(&q.States, "state", nil, "only these states (starting, running, failed, ended)")
	f.StringArrayVar(&labels, "label", nil, "only sandboxes with this label (KEY=VALUE; repeatable, all must match)")
	f.StringVar(&q.Node, "node", "", "only sandboxes on this node")
	f.StringVar(&q.Principal, "principal", "", "only this principal's sandboxes (operators), e.g. agent:ci")
	f.IntVar(&q.Limit, "limit", 0, "one page of at most N sandboxes (1-1000)")
	f.StringVar(&q.Cursor, "cursor", "", "the page after this cursor")
	return cmd
}

func newSandboxGetCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return apiError(a, err)
			}
			return printSandbox(cmd.OutOrStdout(), a, s)
		},
	}
}

func newSandboxDestroyCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "destroy ID",
		Short: "Stop and purge a sandbox, release its budget and revoke its session token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DestroySandbox(cmd.Context(), args[0]); err != nil {
				return apiError(a, err)
			}
			if !a.json() {
				fmt.Fprintf(cmd.OutOrStdout(), "destroyed sandbox %s\n", args[0])
			}
			return nil
		},
	}
}

func newSandboxExtendCmd(a *apiFlags) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "extend ID --ttl DUR",
		Short: "Move a sandbox's expiry to now+DUR (operators; never past its lifetime ceiling)",
		Long: `Move a sandbox's expiry to now+DUR (operators only, rule L2): the new time to
live is the --ttl flag, e.g. sandgate sandbox extend ID --ttl 2h. The
expiry never moves past the sandbox's lifetime ceiling; when the ceiling
cuts the TTL, stderr says so.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				if _, err := time.ParseDuration(args[1]); err == nil {
					return fmt.Errorf("the new TTL is a flag: sandgate sandbox extend %s --ttl %s", args[0], args[1])
				}
			}
			if len(args) != 1 {
				return fmt.Errorf("extend takes one sandbox ID and the new TTL as --ttl, e.g. sandgate sandbox extend ID --ttl 2h (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl < time.Second {
				return errors.New("--ttl is required and at least 1s, e.g. --ttl 30m")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.Extend(cmd.Context(), args[0], ttl)
			if err != nil {
				return apiError(a, err)
			}
			if err := printSandbox(cmd.OutOrStdout(), a, s); err != nil {
				return err
			}
			if !a.json() && s.Clamped != nil && *s.Clamped {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: the lifetime ceiling (%s) cut the requested TTL\n", s.CeilingAt)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "new time to live from now, e.g. 30m")
	return cmd
}
