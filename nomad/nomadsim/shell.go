package nomadsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sandgate/render/execwrap"
	"sandgate/render/fileops"
)

// errShellUnsupported marks a script the simulated shell cannot run.
var errShellUnsupported = errors.New("unsupported")

// shellUnsupportedMsg is what sh prints (exit 127) for such a script.
const shellUnsupportedMsg = "sh: simulated shell supports only 'exit N' and simple builtin commands joined by ';', '&&' or '||'\n"

// shCommand is one simple command of a script.
type shCommand struct {
	words     []string
	redirects [][2]string // {fd, target}: target "&1", "&2" or "/dev/null"
	connector string      // how it joins the previous command: ";", "&&", "||"
	line      int
	// background: the command ended with a single '&'. It runs beside the
	// rest of the script with stdin from /dev/null, its status is 0, and it
	// is killed when the script ends (a real one would outlive it).
	background bool
}

// biSh is the simulated sh: `sh -c SCRIPT` or, without -c, a script read
// from stdin until it closes.
func biSh(p *proc) int {
	if req, ok, err := fileops.Parse(p.args); ok {
		if err != nil {
			p.errf("%s: %v\n", fileops.Name, err)
			return 2
		}
		return biFiles(p, req)
	}
	if cmd, ok, err := execwrap.Parse(p.args); ok {
		if err != nil {
			p.errf("%s: %v\n", execwrap.Name, err)
			return 2
		}
		return biWrapper(p, cmd)
	}
	args := p.args[1:]
	var script string
	fromArg := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		opt := strings.TrimLeft(args[0], "-")
		args = args[1:]
		if strings.Trim(opt, "eucxs") != "" {
			p.errf("sh: 0: Illegal option -%s\n", opt)
			return 2
		}
		if strings.Contains(opt, "c") {
			fromArg = true
		}
	}
	switch {
	case fromArg && len(args) == 0:
		p.errf("sh: 0: -c requires an argument\n")
		return 2
	case fromArg:
		script = args[0]
	default:
		b, err := io.ReadAll(p.stdin)
		if p.killed() || errors.Is(err, errKilled) {
			return exitKilled
		}
		script = string(b)
	}
	cmds, err := parseScript(script)
	if err != nil {
		_, _ = io.WriteString(p.stderr, shellUnsupportedMsg)
		return 127
	}
	return runScript(p, cmds)
}

func runScript(p *proc, cmds []shCommand) int {
	status := 0
	cwd := p.cwd
	var bg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(p.ctx)
	defer func() { stopBg(); bg.Wait() }()
	stdout, stderr := p.stdout, p.stderr
	if slices.ContainsFunc(cmds, func(c shCommand) bool { return c.background }) {
		// Background and foreground commands write at the same time, as
		// processes share a pipe.
		mu := &sync.Mutex{}
		stdout, stderr = &syncWriter{mu: mu, w: stdout}, &syncWriter{mu: mu, w: stderr}
	}
	for _, c := range cmds {
		if p.killed() {
			return exitKilled
		}
		if (c.connector == "&&" && status != 0) || (c.connector == "||" && status == 0) {
			continue
		}
		out, errw := stdout, stderr
		for _, r := range c.redirects {
			var target io.Writer
			switch r[1] {
			case "&1":
				target = out
			case "&2":
				target = errw
			default:
				target = io.Discard
			}
			if r[0] == "1" {
				out = target
			} else {
				errw = target
			}
		}
		words := c.words
		env := p.env
		for len(words) > 0 && isAssignment(words[0]) {
			env = append(append([]string(nil), env...), words[0])
			words = words[1:]
		}
		if len(words) == 0 {
			status = 0
			continue
		}
		exit := false
		switch words[0] {
		case "exit":
			if len(words) > 1 {
				n, err := strconv.Atoi(words[1])
				if err != nil || n < 0 {
					_, _ = fmt.Fprintf(errw, "sh: %d: exit: Illegal number: %s\n", c.line, words[1])
					return 2
				}
				status = n & 0xff
			}
			return status
		case "cd":
			if len(words) > 1 {
				cwd = words[1]
			} else {
				cwd = "/root"
			}
			status = 0
			continue
		case "exec":
			words, exit = words[1:], true
			if len(words) == 0 {
				continue
			}
		}
		child := &proc{ctx: p.ctx, args: words, env: env, cwd: cwd, stdin: p.stdin, stdout: out, stderr: errw, busybox: p.busybox, fs: p.fs}
		fn, ok := lookupBuiltin(words[0])
		switch {
		case ok && c.background:
			child.ctx, child.stdin = bgCtx, strings.NewReader("")
			bg.Go(func() { fn(child) })
			status = 0
		case ok:
			status = fn(child)
		default:
			if p.busybox {
				_, _ = fmt.Fprintf(errw, "sh: %s: not found\n", words[0])
			} else {
				_, _ = fmt.Fprintf(errw, "sh: %d: %s: not found\n", c.line, words[0])
			}
			status = 127
		}
		if exit {
			return status
		}
	}
	if p.killed() {
		return exitKilled
	}
	return status
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		letter := r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z'
		digit := i > 0 && r >= '0' && r <= '9'
		if !letter && !digit {
			return false
		}
	}
	return true
}

// parseScript splits a script into simple commands. It accepts words with
// '...' and "..." quoting and backslash escapes, the operators ; && || and
// newlines, a single '&' that puts a command in the background, comments,
// and the redirections >&2 1>&2 2>&1 [12]>/dev/null.
// Anything else is errShellUnsupported.
func parseScript(script string) ([]shCommand, error) {
	var cmds []shCommand
	cur := shCommand{connector: ";", line: 1}
	line := 1
	var word strings.Builder
	inWord, quoted := false, false
	flush := func() {
		if inWord {
			cur.words = append(cur.words, word.String())
		}
		word.Reset()
		inWord, quoted = false, false
	}
	endCommand := func(next string) error {
		flush()
		if len(cur.words) == 0 && len(cur.redirects) == 0 {
			if next != ";" || cur.connector != ";" {
				return errShellUnsupported // "&& ;" or a leading operator
			}
		} else {
			cmds = append(cmds, cur)
		}
		cur = shCommand{connector: next, line: line}
		return nil
	}
	rs := []rune(script)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			for i+1 < len(rs) && rs[i+1] != '\n' {
				i++
			}
		case c == '\n' || c == ';':
			if err := endCommand(";"); err != nil {
				return nil, err
			}
			if c == '\n' {
				line++
				cur.line = line
			}
		case (c == '&' || c == '|') && i+1 < len(rs) && rs[i+1] == c:
			if err := endCommand(string([]rune{c, c})); err != nil {
				return nil, err
			}
			i++
		case c == '&':
			flush()
			if len(cur.words) == 0 {
				return nil, errShellUnsupported
			}
			cur.background = true
			if err := endCommand(";"); err != nil {
				return nil, err
			}
		case c == '>':
			fd := "1"
			if inWord && !quoted && (word.String() == "1" || word.String() == "2") {
				fd = word.String()
				word.Reset()
				inWord = false
			}
			flush()
			j := i + 1
			for j < len(rs) && rs[j] == ' ' {
				j++
			}
			rest := string(rs[j:])
			var target string
			switch {
			case strings.HasPrefix(rest, "&1"), strings.HasPrefix(rest, "&2"):
				target = rest[:2]
			case strings.HasPrefix(rest, "/dev/null"):
				target = "/dev/null"
			default:
				return nil, errShellUnsupported
			}
			cur.redirects = append(cur.redirects, [2]string{fd, target})
			i = j + len([]rune(target)) - 1
		case c == '\'':
			end := indexRune(rs, i+1, '\'')
			if end < 0 {
				return nil, errShellUnsupported
			}
			word.WriteString(string(rs[i+1 : end]))
			inWord, quoted, i = true, true, end
		case c == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				switch {
				case rs[j] == '$' || rs[j] == '`':
					return nil, errShellUnsupported
				case rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune("\"\\$`\n", rs[j+1]):
					j++
				}
				word.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, errShellUnsupported
			}
			inWord, quoted, i = true, true, j
		case c == '\\' && i+1 < len(rs):
			i++
			if rs[i] != '\n' {
				word.WriteRune(rs[i])
				inWord = true
			}
		case strings.ContainsRune("|&()<`$*?[]{}", c), c == '~' && !inWord:
			return nil, errShellUnsupported
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	if err := endCommand(";"); err != nil {
		return nil, err
	}
	return cmds, nil
}

func indexRune(rs []rune, from int, r rune) int {
	for i := from; i < len(rs); i++ {
		if rs[i] == r {
			return i
		}
	}
	return -1
}
