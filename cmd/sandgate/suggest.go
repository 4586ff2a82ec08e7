package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestFlag adds the nearest flag of the command to an unknown-flag
// error: "unknown flag: --profle (did you mean --profile?)".
func suggestFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	name, _, _ = strings.Cut(name, "=")
	best, bestDist := "", 3 // suggest only within two edits
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := editDistance(name, f.Name); d < bestDist || (d == bestDist && best != "" && f.Name < best) {
			best, bestDist = f.Name, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if best == "" {
		return fmt.Errorf("%w (see: %s --help)", err, cmd.CommandPath())
	}
	return fmt.Errorf("%w (did you mean --%s?)", err, best)
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (flag names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// refuseUnknownSubcommands makes every command group under root (sandbox,
// host, token, ...) refuse a subcommand it does not have, with the nearest
// ones, as cobra does for the root's own: without it a group prints its
// help and exits 0 for "sandbox cpy".
func refuseUnknownSubcommands(root *cobra.Command) {
	for _, g := range root.Commands() {
		if !g.HasSubCommands() || g.Runnable() {
			continue
		}
		refuseUnknownSubcommands(g)
		g.Args = cobra.ArbitraryArgs
		g.SuggestionsMinimumDistance = 2
		g.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += " (did you mean " + strings.Join(s, " or ") + "?)"
			} else {
				msg += " (see: " + c.CommandPath() + " --help)"
			}
			return errors.New(msg)
		}
	}
}

// explainArgErrors makes every runnable command under root say, when its
// arguments are wrong, what it takes: cobra's own "accepts 1 arg(s),
// received 2" is followed by the command's usage line.
func explainArgErrors(root *cobra.Command) {
	for _, c := range root.Commands() {
		explainArgErrors(c)
		if !c.Runnable() || c.Args == nil {
			continue
		}
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return fmt.Errorf("%w\nusage: %s (see %s --help)", err, cmd.UseLine(), cmd.CommandPath())
			}
			return nil
		}
	}
}
