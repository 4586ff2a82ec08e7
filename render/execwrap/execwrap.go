// Package execwrap renders the command line the gateway runs inside a
// sandbox for every exec (rules E1, E2).
//
// Nomad's alloc exec runs one argv in the task and does not stop it when
// the stream closes, so the gateway never sends the caller's argv alone: it
// sends /bin/sh -c Script with the caller's values as positional parameters.
// Nothing the caller sends is interpolated into the script, and no shell
// runs on the host. The script, in the container:
//
//   - changes to the working directory, if one was asked for (exit
//     ExitSetupFailed when it cannot);
//   - starts the command in a session of its own (setsid), with stdin
//     passed through, after exporting the caller's environment in that
//     child only: the wrapper's own lookups (setsid, sleep, kill) never see
//     the caller's PATH;
//   - starts a watchdog, also in a session of its own, that signals the
//     wrapper when the timeout passes;
//   - on the timeout, sends SIGTERM to the command's whole process group,
//     waits up to KillAfter for the group to be gone, then sends SIGKILL, and
//     exits only once that is done, so no process of the command's tree
//     outlives the exec's answer (a child that starts a session of its own
//     with setsid escapes the group; pids_limit is the backstop);
//   - exits with the command's own status otherwise (127 when the command is
//     not found, as sh reports it).
//
// It needs only a POSIX sh at /bin/sh, setsid (busybox and util-linux both
// have it; without it the command still runs and only the direct child is
// signalled) and sleep, so it works on busybox and GNU images alike. The
// gateway decides whether an exec timed out from its own deadline, never
// from the exit status.
package execwrap

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Shell is the interpreter the wrapper runs under, by absolute path so the
// task's PATH plays no part in finding it.
const Shell = "/bin/sh"

// Name is $0 of the wrapper: what its own error messages start with.
const Name = "sandgate-exec"

// ExitSetupFailed is the wrapper's status when the working directory or an
// environment variable cannot be applied; the command did not start.
const ExitSetupFailed = 125

// Script is the wrapper, run as `/bin/sh -c Script sandgate-exec TIMEOUT
// KILL_AFTER WORKDIR NENV NAME=VALUE... ARGV...` (seconds; WORKDIR may be
// empty).
const Script = `t=$1 k=$2 d=$3 n=$4
shift 4
if [ -n "$d" ]; then cd -- "$d" || exit 125; fi
if command -v setsid >/dev/null 2>&1; then s=setsid; else s=; fi
to=0
trap 'to=1' USR1
exec 3<&0
$s /bin/sh -c 'n=$1; shift; while [ "$n" -gt 0 ]; do export "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"' sandgate-cmd "$n" "$@" <&3 3<&- &
p=$!
exec 3<&- 0</dev/null
$s /bin/sh -c 'sleep "$1"; kill -USR1 "$2"' sandgate-watchdog "$t" "$$" >/dev/null 2>&1 &
w=$!
while :; do
	wait "$p"; rc=$?
	[ "$to" = 1 ] && break
	kill -0 "$p" 2>/dev/null || break
done
if [ "$to" = 1 ]; then
	kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
	i=0
	while kill -0 -"$p" 2>/dev/null && [ "$i" -lt $((k*5)) ]; do sleep 0.2; i=$((i+1)); done
	kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
	wait "$p"; rc=$?
fi
kill -KILL -"$w" 2>/dev/null || kill -KILL "$w" 2>/dev/null
exit "$rc"
`

// Command is one exec as the caller asked for it.
type Command struct {
	// Argv is the caller's command; Argv[0] is looked up through the
	// caller's PATH when Env sets one, else the task's.
	Argv []string
	// Env is set for the command only, not for the wrapper.
	Env map[string]string
	// Workdir is the directory the command starts in; "" keeps the task's.
	Workdir string
	// Timeout and KillAfter are whole seconds (rounded down; at least 1).
	Timeout   time.Duration
	KillAfter time.Duration
}

// Args returns the argv the gateway sends to Nomad.
func (c Command) Args() []string {
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, 8+len(keys)+len(c.Argv))
	out = append(out, Shell, "-c", Script, Name,
		strconv.FormatInt(seconds(c.Timeout), 10), strconv.FormatInt(seconds(c.KillAfter), 10),
		c.Workdir, strconv.Itoa(len(keys)))
	for _, k := range keys {
		out = append(out, k+"="+c.Env[k])
	}
	return append(out, c.Argv...)
}

func seconds(d time.Duration) int64 { return max(1, int64(d/time.Second)) }

// Parse reads back a Command from Args' output; ok is false for any other
// argv. The Nomad simulator uses it to emulate the wrapper.
func Parse(argv []string) (Command, bool, error) {
	if len(argv) < 8 || argv[0] != Shell || argv[1] != "-c" || argv[2] != Script || argv[3] != Name {
		return Command{}, false, nil
	}
	num := func(i int) (int64, error) {
		v, err := strconv.ParseInt(argv[i], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("execwrap: argument %d: %q is not a count", i, argv[i])
		}
		return v, nil
	}
	t, err := num(4)
	if err != nil {
		return Command{}, true, err
	}
	k, err := num(5)
	if err != nil {
		return Command{}, true, err
	}
	n, err := num(7)
	if err != nil {
		return Command{}, true, err
	}
	rest := argv[8:]
	if int64(len(rest)) < n {
		return Command{}, true, fmt.Errorf("execwrap: %d environment pairs announced, %d arguments left", n, len(rest))
	}
	c := Command{Workdir: argv[6], Timeout: time.Duration(t) * time.Second, KillAfter: time.Duration(k) * time.Second}
	if n > 0 {
		c.Env = make(map[string]string, n)
	}
	for _, kv := range rest[:n] {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return Command{}, true, fmt.Errorf("execwrap: %q is not NAME=VALUE", kv)
		}
		c.Env[name] = value
	}
	c.Argv = rest[n:]
	return c, true, nil
}

// ExecIDEnv names the variable a streaming exec's command gets (the
// SANDGATE_ prefix is reserved by the policy, E1: a caller cannot set it):
// the exec's own id, which the command's whole process tree inherits.
const ExecIDEnv = "SANDGATE_EXEC_ID"

// StopScript kills, with SIGKILL, every process of the task whose
// environment holds ExecIDEnv=$1: the process tree of one streaming exec
// whose caller went away (Nomad does not stop a command when its exec
// stream closes). It needs only sh, tr and grep, as busybox and GNU images
// have; a process that cleared its environment escapes it (the exec's
// timeout and pids_limit remain).
const StopScript = `id=$1
for e in /proc/[0-9]*/environ; do
	p=${e#/proc/}; p=${p%/environ}
	if tr '\000' '\n' < "$e" 2>/dev/null | grep -qx "` + ExecIDEnv + `=$id"; then kill -KILL "$p" 2>/dev/null; fi
done
exit 0`

// StopArgs is the argv of the exec that stops the streaming exec id.
func StopArgs(id string) []string { return []string{Shell, "-c", StopScript, "sandgate-stop", id} }
