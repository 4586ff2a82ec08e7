package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"sandgate/gateway/client"
)

// printJSON writes v as indented JSON: what -o json prints, and nothing else.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// maxTableWidth is the width a default table (-o table) keeps to, so that
// it reads in a terminal of 100 columns; -o wide shows every column at its
// full width, -o json everything.
const maxTableWidth = 100

// columnGap is the space between two columns.
const columnGap = 2

// minCutWidth is the narrowest a cut column becomes.
const minCutWidth = 8

// table writes aligned columns; call flush when done.
type table struct {
	w    io.Writer
	rows [][]string
	// width, when positive, is the widest a line may be: the columns in
	// cut are shortened (widest first, the cut marked with "…") until the
	// lines fit.
	width int
	cut   []int
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// fit makes the table keep to width columns by shortening the columns cut
// (indexes), as far as minCutWidth each.
func (t *table) fit(width int, cut ...int) *table {
	t.width, t.cut = width, cut
	return t
}

// row adds one line; a cell's tabs and newlines become spaces so that no
// value (a label, an error text) can break the columns.
func (t *table) row(cells ...string) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = cell(c)
	}
	t.rows = append(t.rows, r)
}

func (t *table) flush() error {
	widths := t.widths()
	if t.width > 0 {
		t.shrink(widths)
	}
	tw := tabwriter.NewWriter(t.w, 0, 4, columnGap, ' ', 0)
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(widths) && utf8.RuneCountInString(c) > widths[i] {
				r[i] = string([]rune(c)[:widths[i]-1]) + "…"
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// widths are the columns' natural widths.
func (t *table) widths() []int {
	var w []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, 0)
			}
			w[i] = max(w[i], utf8.RuneCountInString(c))
		}
	}
	return w
}

// shrink cuts the cuttable columns, the widest first, until a line fits
// t.width or none can be cut further.
func (t *table) shrink(w []int) {
	total := func() int {
		n := columnGap * (len(w) - 1)
		for _, x := range w {
			n += x
		}
		return n
	}
	for total() > t.width {
		widest := -1
		for _, i := range t.cut {
			if i < len(w) && w[i] > minCutWidth && (widest < 0 || w[i] > w[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			return
		}
		w[widest]--
	}
}

// ago writes an RFC 3339 time relative to now for a narrow column: "in
// 59m", "3h ago"; "-" for none, the text itself when it is no time.
func ago(s string, now time.Time) string {
	if s == "" {
		return "-"
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return s
	}
	d := at.Sub(now)
	if d >= 0 {
		return "in " + shortDuration(d)
	}
	return shortDuration(-d) + " ago"
}

// shortDuration is d in at most two units: 45s, 59m, 3h59m, 364d.
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) - 60*h; m > 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// fields writes "name: value" lines, aligned, skipping empty values.
func fields(w io.Writer, kv ...string) error {
	t := newTable(w)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			t.row(kv[i]+":", kv[i+1])
		}
	}
	return t.flush()
}

// cell makes one table cell of printable text (client.Printable: white
// space becomes a space, controls and bidi overrides are dropped), and an
// empty value shows as "-".
func cell(s string) string {
	s = client.Printable(s)
	if s == "" {
		return "-"
	}
	return s
}

// orDash is "-" for an empty time or value.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// labelsText is "k=v,k2=v2", sorted by key.
func labelsText(l map[string]string) string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// parseKV reads repeated K=V flags into a map.
func parseKV(flag string, in []string) (map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(in))
	for _, s := range in {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE", flag, s)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--%s: %q given twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}
