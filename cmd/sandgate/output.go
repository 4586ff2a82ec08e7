package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"sandgate/gateway/client"
)

// printJSON writes v as indented JSON: what -o json prints, and nothing else.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row writes one line; a cell's tabs and newlines become spaces so that
// no value (a label, an error text) can break the columns.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

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
