package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"sandgate/gateway/audit"
	"sandgate/policies"
)

// WorkerArgs are the arguments that make the sandgate binary a replay
// worker (`sandgate policy replay-worker`, a hidden subcommand): the
// gateway re-executes itself with them, and a test binary that serves
// workers (gatewaytest.Main) recognises them.
var WorkerArgs = []string{"policy", "replay-worker"}

// SelfCommand is the replay worker of this very binary: /proc/self/exe,
// the running executable even if its file was replaced since it started,
// with WorkerArgs and an empty environment.
func SelfCommand() Command {
	return Command{Path: "/proc/self/exe", Args: WorkerArgs, Env: []string{}}
}

// IsWorker reports whether args (os.Args[1:]) are WorkerArgs.
func IsWorker(args []string) bool {
	return len(args) == len(WorkerArgs) && args[0] == WorkerArgs[0] && args[1] == WorkerArgs[1]
}

// workerRequest is the first line a worker reads: the candidate and the
// replay's bounds. One audit.Entry per line follows, until end of input.
type workerRequest struct {
	Bundle  []byte  `json:"bundle"`
	Options Options `json:"options"`
}

// workerResult is the one line a worker writes: a report, or why the
// candidate could not be replayed.
type workerResult struct {
	Report *Report `json:"report,omitempty"`
	// Candidate is set when the candidate bundle does not load.
	Candidate string `json:"candidate_error,omitempty"`
}

// maxWorkerLine bounds one line of the worker's input: the request (the
// candidate, base64) or one logged decision with its input.
const maxWorkerLine = 256 << 20

// ServeWorker is the replay worker: it reads a request and logged
// decisions from in, replays them under the candidate and writes the
// result to out. It runs in a child process that the gateway bounds in
// memory, CPU time and wall-clock time (Run), so that a candidate that
// grows without bound ends the child, never the gateway. A candidate that
// does not load is a result, not an error; an error means the exchange
// itself broke.
func ServeWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxWorkerLine)
	if !sc.Scan() {
		return fmt.Errorf("replay worker: no request: %w", cmpErr(sc.Err(), io.ErrUnexpectedEOF))
	}
	var req workerRequest
	if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
		return fmt.Errorf("replay worker: request: %w", err)
	}
	candidate, err := policies.New(ctx, policies.Config{BundleData: req.Bundle})
	if err != nil {
		return writeResult(out, workerResult{Candidate: err.Error()})
	}
	req.Bundle = nil
	r := New(candidate, req.Options)
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("replay worker: logged decision: %w", err)
		}
		if err := r.Add(ctx, e); err != nil {
			if errors.Is(err, ErrLimit) {
				break
			}
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("replay worker: read: %w", err)
	}
	rep := r.Report()
	return writeResult(out, workerResult{Report: &rep})
}

func writeResult(out io.Writer, res workerResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
