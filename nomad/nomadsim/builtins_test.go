package nomadsim

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testEnv = taskEnv("0123456789abcdef", "job.g[0]", "job", "g", "main", map[string]string{"FOO": "bar"})

// run runs argv as an exec'd command would run, with stdin closed after
// the given text.
func run(ctx context.Context, argv []string, stdin string) (int, string, string) {
	pipe := &stdinPipe{wake: make(chan struct{})}
	pipe.write([]byte(stdin))
	pipe.close()
	var out, errb bytes.Buffer
	fn, ok := lookupBuiltin(argv[0])
	if !ok {
		return -1, "", "not a builtin"
	}
	code := fn(&proc{ctx: ctx, args: argv, env: testEnv, cwd: "/", stdin: &stdinReader{p: pipe, ctx: ctx}, stdout: &out, stderr: &errb, fs: newContainerFS(time.Now)})
	return code, out.String(), errb.String()
}

func TestBuiltinsBehaveLikeTheirCoreutilsNamesakes(t *testing.T) {
	t.Parallel()
	unsupported := shellUnsupportedMsg
	cases := []struct {
		name   string
		argv   []string
		stdin  string
		code   int
		stdout string
		stderr string
	}{
		{"echo joins its arguments", []string{"echo", "a", "b  c"}, "", 0, "a b  c\n", ""},
		{"echo -n omits the newline", []string{"echo", "-n", "hi"}, "", 0, "hi", ""},
		{"echo -e interprets escapes", []string{"echo", "-e", `a\tb\nc`}, "", 0, "a\tb\nc\n", ""},
		{"an absolute path finds the builtin", []string{"/usr/bin/echo", "x"}, "", 0, "x\n", ""},
		{"true exits 0", []string{"true"}, "", 0, "", ""},
		{"false exits 1", []string{"false"}, "", 1, "", ""},
		{"sleep sleeps fractions", []string{"sleep", "0.01"}, "", 0, "", ""},
		{"sleep needs an operand", []string{"sleep"}, "", 1, "", "sleep: missing operand\nTry 'sleep --help' for more information.\n"},
		{"sleep rejects nonsense", []string{"sleep", "soon"}, "", 1, "", "sleep: invalid time interval ‘soon’\nTry 'sleep --help' for more information.\n"},
		{"cat copies stdin", []string{"cat"}, "line 1\nline 2\n", 0, "line 1\nline 2\n", ""},
		{"cat reads the container's files", []string{"cat", "/etc/passwd"}, "", 0, "root:x:0:0:root:/root:/bin/sh\n", ""},
		{"cat of a missing file fails", []string{"cat", "/workspace/nope", "/etc/passwd"}, "", 1, "root:x:0:0:root:/root:/bin/sh\n", "cat: /workspace/nope: No such file or directory\n"},
		{"cat of a directory fails", []string{"cat", "/tmp"}, "", 1, "", "cat: /tmp: Is a directory\n"},
		{"ln -s makes a link cat follows", []string{"sh", "-c", "ln -s /etc/passwd /tmp/pw && cat /tmp/pw"}, "", 0, "root:x:0:0:root:/root:/bin/sh\n", ""},
		{"mkdir -p makes parents", []string{"sh", "-c", "mkdir -p /workspace/a/b && mkdir /workspace/a/b"}, "", 1, "", "mkdir: cannot create directory '/workspace/a/b': File exists\n"},
		{"sh exit N", []string{"sh", "-c", "exit 7"}, "", 7, "", ""},
		{"sh exit wraps at 256", []string{"sh", "-c", "exit 300"}, "", 44, "", ""},
		{"sh runs the recorded script", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, "", 3, "out\n", "err\n"},
		{"sh && and ||", []string{"sh", "-c", "false && echo a || echo b; true && echo c"}, "", 0, "b\nc\n", ""},
		{"sh quoting", []string{"sh", "-c", `echo 'a  b' "c \"d\"" e\ f`}, "", 0, "a  b c \"d\" e f\n", ""},
		{"sh 2>&1 and /dev/null", []string{"sh", "-c", "echo gone >/dev/null; echo kept 1>&2 2>&1"}, "", 0, "", "kept\n"},
		{"sh exec replaces the shell", []string{"sh", "-c", "exec sh -c 'exit 4'; echo never"}, "", 4, "", ""},
		{"sh prefix assignments and cd", []string{"bash", "-c", "cd /tmp && pwd; X=1 printenv X"}, "", 0, "/tmp\n1\n", ""},
		{"sh reports an unknown command like dash", []string{"sh", "-c", "echo a\nnope-cmd x"}, "", 127, "a\n", "sh: 2: nope-cmd: not found\n"},
		{"sh refuses variables", []string{"sh", "-c", "echo $HOME"}, "", 127, "", unsupported},
		{"sh refuses pipes", []string{"sh", "-c", "echo a | cat"}, "", 127, "", unsupported},
		{"sh refuses globs", []string{"sh", "-c", "echo *"}, "", 127, "", unsupported},
		{"sh refuses a dangling operator", []string{"sh", "-c", "echo a &&"}, "", 127, "", unsupported},
		{"sh refuses an illegal exit", []string{"sh", "-c", "exit x"}, "", 2, "", "sh: 1: exit: Illegal number: x\n"},
		{"sh -c needs a script", []string{"sh", "-c"}, "", 2, "", "sh: 0: -c requires an argument\n"},
		{"sh without -c reads its script from stdin", []string{"sh"}, "echo from-stdin\nexit 5\n", 5, "from-stdin\n", ""},
		{"yes STRING repeats the line", []string{"yes", "ab"}, "", 0, strings.Repeat("ab\n", yesLimit/3) + "a", ""},
		{"env prints the task environment", []string{"env"}, "", 0, strings.Join(testEnv, "\n") + "\n", ""},
		{"env -i with assignments", []string{"env", "-i", "A=1", "B=2"}, "", 0, "A=1\nB=2\n", ""},
		{"env runs a command with env and cwd", []string{"env", "-C", "/work", "X=y", "sh", "-c", "pwd; printenv X"}, "", 0, "/work\ny\n", ""},
		{"env -u unsets", []string{"env", "-u", "FOO", "printenv", "FOO"}, "", 1, "", ""},
		{"env with an unknown command", []string{"env", "python3"}, "", 127, "", "env: ‘python3’: No such file or directory\n"},
		{"pwd is / by default", []string{"pwd"}, "", 0, "/\n", ""},
		{"printenv reads the task env", []string{"printenv", "HOME", "NOMAD_TASK_NAME", "FOO"}, "", 0, "/root\nmain\nbar\n", ""},
		{"printenv of an unset name fails", []string{"printenv", "NOPE"}, "", 1, "", ""},
		{"timeout kills with 124", []string{"timeout", "0.05", "sleep", "10"}, "", 124, "", ""},
		{"timeout -s KILL exits 137", []string{"timeout", "-s", "KILL", "0.05", "sleep", "10"}, "", 137, "", ""},
		{"timeout -k and --signal= forms", []string{"timeout", "-k", "1", "--signal=TERM", "0.05", "sleep", "10"}, "", 124, "", ""},
		{"timeout passes a fast status through", []string{"timeout", "5", "sh", "-c", "exit 9"}, "", 9, "", ""},
		{"timeout needs a command", []string{"timeout", "5"}, "", 125, "", "timeout: missing operand\nTry 'timeout --help' for more information.\n"},
		{"timeout rejects a bad interval", []string{"timeout", "x", "true"}, "", 125, "", "timeout: invalid time interval ‘x’\nTry 'timeout --help' for more information.\n"},
		{"timeout rejects a bad signal", []string{"timeout", "-s", "BOGUS", "1", "true"}, "", 125, "", "timeout: ‘BOGUS’: invalid signal\nTry 'timeout --help' for more information.\n"},
		{"timeout with an unknown command", []string{"timeout", "1", "nope"}, "", 127, "", "timeout: failed to run command ‘nope’: No such file or directory\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(context.Background(), tc.argv, tc.stdin)
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
				short := func(s string) string {
					if len(s) > 200 {
						return s[:200] + "…(" + strconv.Itoa(len(s)) + " bytes)"
					}
					return s
				}
				t.Errorf("%v: got %d %q %q, want %d %q %q", tc.argv, code, short(stdout), short(stderr), tc.code, short(tc.stdout), short(tc.stderr))
			}
		})
	}
}

func TestKilledBuiltinsExitWithSIGKILLStatus(t *testing.T) {
	t.Parallel()
	for _, argv := range [][]string{
		{"sleep", "30"}, {"timeout", "30", "sleep", "30"}, {"sh", "-c", "sleep 30; echo never"},
		{"env", "sleep", "30"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		start := time.Now()
		code, stdout, _ := run(ctx, argv, "")
		cancel()
		if code != exitKilled || strings.Contains(stdout, "never") || time.Since(start) > 5*time.Second {
			t.Errorf("%v killed: exit %d after %v", argv, code, time.Since(start))
		}
	}
	// yes stops between writes (a slow reader makes it outlive the kill).
	ctxYes, cancelYes := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelYes()
	slow := writerFunc(func(b []byte) (int, error) { time.Sleep(5 * time.Millisecond); return len(b), nil })
	if code := biYes(&proc{ctx: ctxYes, args: []string{"yes"}, stdout: slow, stderr: slow}); code != exitKilled {
		t.Errorf("killed yes exited %d", code)
	}
	// cat blocks on stdin until killed.
	pipe := &stdinPipe{wake: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	if code := biCat(&proc{ctx: ctx, args: []string{"cat"}, stdin: &stdinReader{p: pipe, ctx: ctx}, stdout: &out, stderr: &out}); code != exitKilled {
		t.Errorf("killed cat exited %d", code)
	}
}

func TestParseDurationFollowsCoreutils(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"1": time.Second, "1.5": 1500 * time.Millisecond, "2m": 2 * time.Minute, "1h": time.Hour,
		"1d": 24 * time.Hour, "0.5s": 500 * time.Millisecond, "0": 0,
	} {
		if got, ok := parseDuration(in); !ok || got != want {
			t.Errorf("parseDuration(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1y", "NaN"} {
		if _, ok := parseDuration(in); ok {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
	if d, ok := parseDuration("inf"); !ok || d < 100*365*24*time.Hour {
		t.Errorf("inf = %v", d)
	}
}

// TestNothingRunsOnTheHost guards the promise that exec is simulated: no
// file of the package may import os/exec, syscall or the like.
func TestNothingRunsOnTheHost(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{`"os/exec"`: true, `"syscall"`: true, `"golang.org/x/sys/unix"`: true, `"plugin"`: true}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if forbidden[imp.Path.Value] {
				t.Errorf("%s imports %s", f, imp.Path.Value)
			}
		}
	}
	for _, name := range []string{"python3", "bash2", "/opt/x/echo", "rm", "curl", "id"} {
		if _, ok := lookupBuiltin(name); ok {
			t.Errorf("%s is runnable", name)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
