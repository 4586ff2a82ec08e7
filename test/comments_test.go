package test

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A code comment cites what a user of sandgate has: rule ids (docs/policies.md,
// "Every rule") and the pages of docs/ (docs/architecture.md, "Comments").
// A design document kept outside the repository, or a path beside it, means
// nothing to a reader of the code.
var citesMissingDocument = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`\bSPEC\b`), "names SPEC, a document users do not have: cite the rule id or a docs/ page"},
	{regexp.MustCompile(`(?i)\bspec\.md\b`), "names SPEC.md, a document users do not have: cite the rule id or a docs/ page"},
	{regexp.MustCompile(`(?i)\bstyle\.md\b`), "names STYLE.md: cite docs/architecture.md"},
	{regexp.MustCompile(`\.\./shared/`), "names a path outside the repository (../shared/)"},
}

// realSharedPaths are paths outside the repository that comments may name
// because the build really uses them: NOMAD_BIN's default, the Nomad binary
// of the end-to-end suite (Makefile, test/e2e/harness_test.go).
var realSharedPaths = []string{"../shared/nomad/nomad"}

// commentLine is one line of a comment and where it is.
type commentLine struct {
	line int
	text string
}

// commentLines returns the lines of name's comments: Go's (// and /* */)
// through go/scanner, so strings and identifiers are never read as
// comments; Rego's # outside "..." and `...` strings; YAML's # at the start
// of a line or after a blank; a Makefile's # (in a recipe, a line that
// starts with it). Other files have none.
func commentLines(name string, src []byte) []commentLine {
	base := filepath.Base(name)
	switch {
	case strings.HasSuffix(base, ".go"):
		return goComments(src)
	case strings.HasSuffix(base, ".rego"):
		return regoComments(src)
	case strings.HasSuffix(base, ".yml"), strings.HasSuffix(base, ".yaml"):
		return yamlComments(src)
	case base == "Makefile":
		return makeComments(src)
	}
	return nil
}

func goComments(src []byte) []commentLine {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	var out []commentLine
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok != token.COMMENT {
			continue
		}
		first := fset.Position(pos).Line
		for i, l := range strings.Split(lit, "\n") {
			out = append(out, commentLine{line: first + i, text: l})
		}
	}
}

func regoComments(src []byte) []commentLine {
	var out []commentLine
	line, quote := 1, byte(0) // quote: the string being read, '"' or '`'
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			line++
		case quote == '"' && c == '\\':
			i++ // an escaped character, never a newline in a Rego string
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '`':
			quote = c
		case c == '#':
			end := bytes.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			out = append(out, commentLine{line: line, text: string(src[i : i+end])})
			i += end - 1
		}
	}
	return out
}

func yamlComments(src []byte) []commentLine {
	var out []commentLine
	for n, l := range strings.Split(string(src), "\n") {
		for i := 0; i < len(l); i++ {
			if l[i] == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t') {
				out = append(out, commentLine{line: n + 1, text: l[i:]})
				break
			}
		}
	}
	return out
}

func makeComments(src []byte) []commentLine {
	var out []commentLine
	for n, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "\t") { // a recipe: the shell reads its #s
			if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") {
				out = append(out, commentLine{line: n + 1, text: t})
			}
			continue
		}
		for i := 0; i < len(l); i++ {
			if l[i] == '#' && (i == 0 || l[i-1] != '\\') {
				out = append(out, commentLine{line: n + 1, text: l[i:]})
				break
			}
		}
	}
	return out
}

// commentProblems returns one report per comment line of name that cites
// a document users do not have, as "name:line: why: text".
func commentProblems(name string, src []byte) []string {
	var out []string
	for _, c := range commentLines(name, src) {
		text := c.text
		for _, p := range realSharedPaths {
			text = strings.ReplaceAll(text, p, "")
		}
		for _, f := range citesMissingDocument {
			if f.re.MatchString(text) {
				out = append(out, fmt.Sprintf("%s:%d: %s: %s", name, c.line, f.why, strings.TrimSpace(c.text)))
				break // one report per line
			}
		}
	}
	return out
}

// Every comment of the repository's Go, Rego, YAML and Makefiles cites rule
// ids and docs/, never a document kept outside the repository nor a path
// beside it (citesMissingDocument; issue 22).
func TestNoCodeCommentCitesADocumentUsersLack(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	kindOf := func(path string, d fs.DirEntry) string {
		if d.Name() == "Makefile" {
			return "Makefile"
		}
		return filepath.Ext(path)
	}
	walkRepo(t, func(path string, d fs.DirEntry) bool {
		switch kindOf(path, d) {
		case ".go", ".rego", ".yml", ".yaml", "Makefile":
			seen[kindOf(path, d)]++
			return true
		}
		return false
	}, func(path string, src []byte) {
		for _, p := range commentProblems(path, src) {
			t.Error(p)
		}
	})
	// A walk from the wrong directory would find nothing and pass.
	if seen[".go"] < 100 || seen[".rego"] < 10 || seen[".yml"] < 1 || seen["Makefile"] < 1 {
		t.Fatalf("the walk saw only %v: it looked in the wrong place", seen)
	}
}

// The check itself, on planted lines: each cited document is caught in the
// comments of each kind of file, and strings, identifiers and the real
// Nomad binary path are not.
func TestTheCommentCheckCatchesPlantedLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, file, src string
		want            []string // the lines caught, as "file:line"
	}{
		{"a Go line comment citing the SPEC's rule", "store/x.go",
			"package x\n\n// Reserve is atomic (SPEC B1).\nfunc Reserve() {}\n", []string{"store/x.go:3"}},
		{"a Go comment citing SPEC.md", "x.go",
			"package x\n\nfunc f() {\n\tx := 1 // see spec.md\n\t_ = x\n}\n", []string{"x.go:4"}},
		{"a Go block comment, on its second line", "x.go",
			"package x\n\n/* The profiles\n   of the SPEC. */\nvar p int\n", []string{"x.go:4"}},
		{"a Go comment citing STYLE.md", "x_test.go",
			"package x\n\n// The direction of STYLE.md.\nvar d int\n", []string{"x_test.go:3"}},
		{"a Go comment citing ../shared", "x.go",
			"package x\n\n// See ../shared/notes.txt.\nvar d int\n", []string{"x.go:3"}},
		{"the real Nomad binary path beside another shared path", "x.go",
			"package x\n\n// NOMAD_BIN, default ../shared/nomad/nomad; see ../shared/notes\n", []string{"x.go:3"}},
		{"the real Nomad binary path alone", "x.go",
			"package x\n\n// NOMAD_BIN, default ../shared/nomad/nomad.\nvar d int\n", nil},
		{"a string and an identifier are no comment", "x.go",
			"package x\n\nvar s = \"SPEC\" + `STYLE.md` + \"../shared/x\" // names no document\n\n// SandboxSpec is a spec.\ntype SandboxSpec struct{}\n", nil},
		{"a Rego METADATA comment", "policies/p/p.rego",
			"package p\n\n# METADATA\n# description: as SPEC.md says\nallow if true\n", []string{"policies/p/p.rego:4"}},
		{"a Rego comment after a multi-line raw string", "p.rego",
			"package p\n\nx := `a\n# not a comment: SPEC`  # SPEC B1\n", []string{"p.rego:4"}},
		{"hashes in Rego strings are no comment", "p.rego",
			"package p\n\nx := \"# SPEC \\\" # STYLE.md\"\ny := `# ../shared/z`\n", nil},
		{"a YAML comment", ".golangci.yml",
			"linters:\n  # The direction of STYLE.md:\n  default: none # SPEC\n  url: http://x/#SPEC\n", []string{".golangci.yml:2", ".golangci.yml:3"}},
		{"a Makefile comment", "Makefile",
			"NOMAD_BIN ?= ../shared/nomad/nomad\n# the SPEC's order\nall: test\n\t@echo '#' SPEC\n\t# ../shared/x\n", []string{"Makefile:2", "Makefile:5"}},
		{"a file of another kind", "notes.md", "# SPEC\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, p := range commentProblems(c.file, []byte(c.src)) {
				loc := strings.SplitN(p, ":", 3)
				got = append(got, loc[0]+":"+loc[1])
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("caught %q, want %q", got, c.want)
			}
		})
	}
}
