package nomadsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The commands exec can run. They are Go functions: nothing ever runs on the
// host. Their observable behaviour follows coreutils and dash closely enough
// for a gateway's tests, with these deliberate limits:
//
//   - echo [-n] [-e] ARGS...      prints ARGS
//   - true, false, :              exit 0, 1, 0
//   - sleep N[smhd]...            sleeps the sum; fractions allowed; killable
//   - cat [-] | cat FILE...       copies stdin to stdout until stdin closes,
//     or the files of the container's in-memory filesystem (containerfs.go)
//   - ln -s TARGET NAME, mkdir [-p] DIR...  on that filesystem
//   - sh -c on the gateway's file operations script (render/fileops) is
//     emulated on it too (biFiles)
//   - sh -c SCRIPT                runs a script of simple builtin commands
//     joined by ';', '&&', '||' or newlines, or put in the background with
//     '&' (killed when the script ends), with quotes, `>&2`, `2>&1`,
//     `>/dev/null`, `exit N` and `exec CMD`; anything else (pipes,
//     variables, globs, subshells, ...) exits 127 with "sh: simulated shell
//     supports only 'exit N' ..." on stderr
//   - yes [STRING]                writes the line until 1 MiB in total has
//     been written (real yes never stops), then exits 0; killable
//   - env [-i] [-u NAME] [-C DIR] [NAME=VALUE]... [COMMAND ARGS...]
//   - pwd, printenv [NAME]...
//   - timeout [-k DUR] [-s SIG] DUR COMMAND ARGS...  exits 124 (137 with
//     -s KILL) when DUR passes, like coreutils
//
// A name is also found under /bin, /usr/bin, /usr/local/bin, /sbin and
// /usr/sbin. A killed command exits 137 (SIGKILL).

// exitKilled is the status of a command killed by SIGKILL.
const exitKilled = 128 + 9

// yesLimit bounds what `yes` writes before it exits on its own.
const yesLimit = 1 << 20

// errKilled is returned by stdin reads of a killed command.
var errKilled = errors.New("killed")

// proc is one simulated process.
type proc struct {
	ctx    context.Context // done means SIGKILL
	args   []string        // argv; args[0] is the command as given
	env    []string        // NAME=VALUE, in order
	cwd    string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// busybox: the task's image is busybox, whose sh words some errors
	// differently from dash's (busyboxImage).
	busybox bool
	// fs is the container's filesystem (containerfs.go).
	fs *containerFS
}

// busyboxImage reports whether a docker task runs a busybox image (its
// repository's last path element starts with "busybox"), so the simulated
// sh answers in busybox's words.
func busyboxImage(t *api.Task) bool {
	if t == nil || t.Driver != "docker" {
		return false
	}
	img, _ := t.Config["image"].(string)
	repo, _, _ := strings.Cut(path.Base(img), ":")
	return strings.HasPrefix(repo, "busybox")
}

type builtinFunc func(p *proc) int

// builtins is filled in init because env, timeout and sh call back into it.
var builtins map[string]builtinFunc

func init() {
	builtins = map[string]builtinFunc{
		"echo": biEcho, "true": func(*proc) int { return 0 }, ":": func(*proc) int { return 0 },
		"false": func(*proc) int { return 1 }, "sleep": biSleep, "cat": biCat, "sh": biSh,
		"bash": biSh, "dash": biSh, "yes": biYes, "env": biEnv, "pwd": biPwd,
		"printenv": biPrintenv, "timeout": biTimeout, "ln": biLn, "mkdir": biMkdir,
	}
}

var binDirs = map[string]bool{"/bin": true, "/usr/bin": true, "/usr/local/bin": true, "/sbin": true, "/usr/sbin": true}

// lookupBuiltin finds the builtin a command name runs, if any.
func lookupBuiltin(name string) (builtinFunc, bool) {
	if strings.Contains(name, "/") {
		if !binDirs[path.Dir(name)] {
			return nil, false
		}
		name = path.Base(name)
	}
	fn, ok := builtins[name]
	return fn, ok
}

// sub runs argv as a child of p with p's streams.
func (p *proc) sub(ctx context.Context, argv, env []string, cwd string) (int, bool) {
	fn, ok := lookupBuiltin(argv[0])
	if !ok {
		return 127, false
	}
	return fn(&proc{ctx: ctx, args: argv, env: env, cwd: cwd, stdin: p.stdin, stdout: p.stdout, stderr: p.stderr, busybox: p.busybox, fs: p.fs}), true
}

func (p *proc) errf(format string, a ...any) {
	_, _ = fmt.Fprintf(p.stderr, format, a...)
}

func (p *proc) killed() bool { return p.ctx.Err() != nil }

func (p *proc) getenv(name string) (string, bool) {
	for i := len(p.env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(p.env[i], "="); k == name {
			return v, true
		}
	}
	return "", false
}

func biEcho(p *proc) int {
	args := p.args[1:]
	newline, escapes := true, false
	for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-E") {
		switch args[0] {
		case "-n":
			newline = false
		case "-e":
			escapes = true
		case "-E":
			escapes = false
		}
		args = args[1:]
	}
	out := strings.Join(args, " ")
	if escapes {
		out = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\r`, "\r").Replace(out)
	}
	if newline {
		out += "\n"
	}
	_, _ = io.WriteString(p.stdout, out)
	return 0
}

// parseDuration reads a coreutils time interval: a number with an optional
// s, m, h or d suffix, or "inf".
func parseDuration(s string) (time.Duration, bool) {
	if s == "inf" || s == "infinity" {
		return time.Duration(1<<63 - 1), true
	}
	unit := time.Second
	switch {
	case strings.HasSuffix(s, "s"):
		s = s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		s, unit = s[:len(s)-1], time.Minute
	case strings.HasSuffix(s, "h"):
		s, unit = s[:len(s)-1], time.Hour
	case strings.HasSuffix(s, "d"):
		s, unit = s[:len(s)-1], 24*time.Hour
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f != f {
		return 0, false
	}
	if f*float64(unit) > float64(1<<63-1) {
		return time.Duration(1<<63 - 1), true
	}
	return time.Duration(f * float64(unit)), true
}

// wait sleeps for d or until the process is killed; it reports false when
// killed.
func (p *proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

func biSleep(p *proc) int {
	if len(p.args) < 2 {
		p.errf("sleep: missing operand\nTry 'sleep --help' for more information.\n")
		return 1
	}
	var total time.Duration
	for _, a := range p.args[1:] {
		d, ok := parseDuration(a)
		if !ok {
			p.errf("sleep: invalid time interval ‘%s’\nTry 'sleep --help' for more information.\n", a)
			return 1
		}
		total += d
		if total < 0 {
			total = time.Duration(1<<63 - 1)
		}
	}
	if !p.wait(total) {
		return exitKilled
	}
	return 0
}

func biCat(p *proc) int {
	if files := p.args[1:]; len(files) > 1 || (len(files) == 1 && files[0] != "-") {
		status := 0
		for _, a := range files {
			b, err := p.readFile(a)
			if err != nil {
				p.errf("cat: %s: %v\n", a, err)
				status = 1
				continue
			}
			_, _ = p.stdout.Write(b)
		}
		return status
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := p.stdin.Read(buf)
		if n > 0 {
			_, _ = p.stdout.Write(buf[:n])
		}
		if errors.Is(err, errKilled) || p.killed() {
			return exitKilled
		}
		if err != nil {
			return 0
		}
	}
}

func biYes(p *proc) int {
	line := "y"
	if len(p.args) > 1 {
		line = strings.Join(p.args[1:], " ")
	}
	line += "\n"
	chunk := strings.Repeat(line, max(1, (8<<10)/len(line)))
	for written := 0; written < yesLimit; {
		if p.killed() {
			return exitKilled
		}
		n := min(len(chunk), yesLimit-written)
		_, _ = io.WriteString(p.stdout, chunk[:n])
		written += n
	}
	return 0
}

func biPwd(p *proc) int {
	_, _ = io.WriteString(p.stdout, p.cwd+"\n")
	return 0
}

func biPrintenv(p *proc) int {
	if len(p.args) == 1 {
		for _, kv := range p.env {
			_, _ = io.WriteString(p.stdout, kv+"\n")
		}
		return 0
	}
	status := 0
	for _, name := range p.args[1:] {
		if v, ok := p.getenv(name); ok {
			_, _ = io.WriteString(p.stdout, v+"\n")
		} else {
			status = 1
		}
	}
	return status
}

func biEnv(p *proc) int {
	args := p.args[1:]
	env := append([]string(nil), p.env...)
	cwd := p.cwd
	unset := func(name string) {
		kept := env[:0]
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); k != name {
				kept = append(kept, kv)
			}
		}
		env = kept
	}
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		args = args[1:]
		switch {
		case a == "--":
			goto assignments
		case a == "-i" || a == "-" || a == "--ignore-environment":
			env = nil
		case (a == "-u" || a == "-C") && len(args) > 0:
			if a == "-u" {
				unset(args[0])
			} else {
				cwd = args[0]
			}
			args = args[1:]
		case strings.HasPrefix(a, "--chdir="):
			cwd = strings.TrimPrefix(a, "--chdir=")
		case strings.HasPrefix(a, "--unset="):
			unset(strings.TrimPrefix(a, "--unset="))
		default:
			p.errf("env: invalid option -- '%s'\nTry 'env --help' for more information.\n", strings.TrimLeft(a, "-"))
			return 125
		}
	}
assignments:
	for len(args) > 0 && strings.Contains(args[0], "=") {
		unset(strings.SplitN(args[0], "=", 2)[0])
		env = append(env, args[0])
		args = args[1:]
	}
	if len(args) == 0 {
		for _, kv := range env {
			_, _ = io.WriteString(p.stdout, kv+"\n")
		}
		return 0
	}
	status, found := p.sub(p.ctx, args, env, cwd)
	if !found {
		p.errf("env: ‘%s’: No such file or directory\n", args[0])
	}
	return status
}

var signals = map[string]int{"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "TERM": 15}

func parseSignal(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return n, true
	}
	n, ok := signals[strings.TrimPrefix(strings.ToUpper(s), "SIG")]
	return n, ok
}

func biTimeout(p *proc) int {
	args := p.args[1:]
	sig := signals["TERM"]
	usage := func() int {
		p.errf("timeout: missing operand\nTry 'timeout --help' for more information.\n")
		return 125
	}
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		var val string
		switch {
		case a == "--":
			goto operands
		case a == "--preserve-status" || a == "--foreground" || a == "-v" || a == "--verbose":
			continue
		case a == "-k" || a == "-s":
			if len(args) == 0 {
				return usage()
			}
			val, args = args[0], args[1:]
		case strings.HasPrefix(a, "--kill-after=") || strings.HasPrefix(a, "--signal="):
			_, val, _ = strings.Cut(a, "=")
			a = map[bool]string{true: "-k", false: "-s"}[strings.HasPrefix(a, "--kill")]
		case strings.HasPrefix(a, "-k") || strings.HasPrefix(a, "-s"):
			a, val = a[:2], a[2:]
		default:
			p.errf("timeout: invalid option -- '%s'\nTry 'timeout --help' for more information.\n", strings.TrimLeft(a, "-"))
			return 125
		}
		if a == "-k" {
			if _, ok := parseDuration(val); !ok {
				p.errf("timeout: invalid time interval ‘%s’\nTry 'timeout --help' for more information.\n", val)
				return 125
			}
			continue // builtins die at once, so the kill-after grace never matters
		}
		n, ok := parseSignal(val)
		if !ok {
			p.errf("timeout: ‘%s’: invalid signal\nTry 'timeout --help' for more information.\n", val)
			return 125
		}
		sig = n
	}
operands:
	if len(args) < 2 {
		return usage()
	}
	d, ok := parseDuration(args[0])
	if !ok {
		p.errf("timeout: invalid time interval ‘%s’\nTry 'timeout --help' for more information.\n", args[0])
		return 125
	}
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	var fired atomic.Bool
	if d > 0 {
		t := time.AfterFunc(d, func() { fired.Store(true); cancel() })
		defer t.Stop()
	}
	status, found := p.sub(ctx, args[1:], p.env, p.cwd)
	if !found {
		p.errf("timeout: failed to run command ‘%s’: No such file or directory\n", args[1])
		return 127
	}
	if p.killed() {
		return exitKilled
	}
	if fired.Load() {
		if sig == signals["KILL"] {
			return exitKilled
		}
		return 124
	}
	return status
}

// taskEnv is what `env` prints inside a simulated task: a container's base
// variables, the NOMAD_* variables and the task's env block.
func taskEnv(allocID, allocName, jobID, group, task string, extra map[string]string) []string {
	host := allocID
	if len(host) > 12 {
		host = host[:12]
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME=" + host,
		"HOME=/root",
		"NOMAD_ALLOC_ID=" + allocID,
		"NOMAD_ALLOC_NAME=" + allocName,
		"NOMAD_JOB_NAME=" + jobID,
		"NOMAD_GROUP_NAME=" + group,
		"NOMAD_TASK_NAME=" + task,
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}
