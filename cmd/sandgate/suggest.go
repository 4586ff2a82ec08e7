package main

import (
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
