package nomadsim

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"sandgate/render/execwrap"
)

// biWrapper emulates the gateway's exec wrapper (render/execwrap), which
// real sandboxes run under /bin/sh: it is recognised by its exact script
// and argument layout, never by a looser match, and behaves as the script
// does on a real task: the working directory and environment apply to the
// command only, the command's exit status is the wrapper's, and when the
// timeout passes the command is killed and the wrapper exits 143 (SIGTERM),
// as the real script does for a command that dies of the TERM it sends.
// A working directory that is not a directory of the container's
// filesystem fails the wrapper's cd: it exits 125 (ExitSetupFailed) with
// the shell's message (real-exec-*-missing-workdir.json).
func biWrapper(p *proc, cmd execwrap.Command) int {
	if len(cmd.Argv) == 0 {
		return 0
	}
	if cmd.Workdir != "" && p.fs != nil {
		if err := p.fs.chdirCheck(cmd.Workdir); err != nil {
			if p.busybox {
				p.errf("%s: cd: line 2: can't cd to %s: %v\n", execwrap.Name, cmd.Workdir, err)
			} else {
				p.errf("%s: 3: cd: can't cd to %s\n", execwrap.Name, cmd.Workdir) // dash names no cause
			}
			return execwrap.ExitSetupFailed
		}
	}
	env := append([]string(nil), p.env...)
	for _, k := range sortedNames(cmd.Env) {
		env = append(env, k+"="+cmd.Env[k])
	}
	cwd := p.cwd
	if cmd.Workdir != "" {
		cwd = cmd.Workdir
	}
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	var fired atomic.Bool
	t := time.AfterFunc(cmd.Timeout, func() { fired.Store(true); cancel() })
	defer t.Stop()
	status, found := p.sub(ctx, cmd.Argv, env, cwd)
	switch {
	case p.killed():
		return exitKilled
	case fired.Load():
		return exitTerminated
	case !found && p.busybox:
		p.errf("sandgate-cmd: exec: line 0: %s: not found\n", cmd.Argv[0]) // real-exec-busybox-not-found.json
		return 127
	case !found:
		p.errf("sandgate-cmd: 1: exec: %s: not found\n", cmd.Argv[0]) // dash: real-exec-debian-not-found.json
		return 127
	}
	return status
}

// exitTerminated is the status of a command killed by SIGTERM.
const exitTerminated = 128 + 15

func sortedNames(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
