package replay_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"sandgate/gateway/audit"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/replay"
	"sandgate/policies"
	"sandgate/policies/policytest"
)

// TestMain lets this test binary be the replay worker (gatewaytest.Main).
func TestMain(m *testing.M) { gatewaytest.Main(m) }

// feedFile hands Run every entry of a decision log file.
func feedFile(file string) func(func(audit.Entry) error) error {
	return func(each func(audit.Entry) error) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = audit.ReadFile(f, each)
		return err
	}
}

var roomy = replay.Limits{Memory: 4 << 30, CPU: 5 * time.Minute, Wall: 5 * time.Minute}

// A replay in a worker reports exactly what the same replay in process
// does, with and without a limit that stops it early.
func TestAWorkerReportsWhatAnInProcessReplayDoes(t *testing.T) {
	t.Parallel()
	log := traffic(t)
	// Build runs the candidate's tests: the small ones, which the lifted
	// bound does not break.
	dir := policytest.CopyWithSmallTests(t, policies.EmbeddedBundle(), policies.EntrypointNames())
	lifted := false
	policytest.EditFile(t, dir, "data.json", func(b []byte) []byte {
		lifted = bytes.Contains(b, []byte(`"max_timeout_seconds": 120`))
		return bytes.Replace(b, []byte(`"max_timeout_seconds": 120`), []byte(`"max_timeout_seconds": 86400`), 1)
	}, &lifted)
	var bundle bytes.Buffer
	if _, err := policies.Build(t.Context(), policies.BuildOptions{Dir: dir, Revision: "worker-1"}, &bundle); err != nil {
		t.Fatal(err)
	}
	candidate, err := policies.New(t.Context(), policies.Config{BundleData: bundle.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []replay.Options{{}, {Limit: 3}} {
		want := replay.New(candidate, opts)
		if err := feedFile(log)(func(e audit.Entry) error { return want.Add(t.Context(), e) }); err != nil && !errors.Is(err, replay.ErrLimit) {
			t.Fatal(err)
		}
		got, err := replay.Run(t.Context(), replay.SelfCommand(), roomy, bundle.Bytes(), opts, feedFile(log))
		if err != nil {
			t.Fatalf("limit %d: %v", opts.Limit, err)
		}
		if !reflect.DeepEqual(got, want.Report()) || (opts.Limit == 0 && got.Flips[replay.DenyToAllow] != 2) || (opts.Limit > 0 && !got.Truncated) {
			t.Fatalf("limit %d: the worker reported %+v, in process %+v", opts.Limit, got, want.Report())
		}
	}
	// A candidate that does not load is the candidate's error, not the worker's.
	_, err = replay.Run(t.Context(), replay.SelfCommand(), roomy, []byte("not a bundle"), replay.Options{}, feedFile(log))
	var ce *replay.CandidateError
	if !errors.As(err, &ce) {
		t.Fatalf("a body that is no bundle: %v", err)
	}
}

// How a worker ended is told from its exit: a memory failure by the Go
// runtime's words (including a thread that could not be created), a CPU
// kill by the time it used, anything else is ErrWorker.
func TestAWorkersEndIsToldByHowItEnded(t *testing.T) {
	t.Parallel()
	sh := func(script string) replay.Command {
		return replay.Command{Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin"}}
	}
	none := func(func(audit.Entry) error) error { return nil }
	for _, c := range []struct {
		name, script string
		limit        string // "" for ErrWorker
	}{
		{"the runtime out of memory", `echo "fatal error: runtime: out of memory" >&2; exit 2`, replay.LimitMemory},
		{"no thread stack", `echo "runtime/cgo: pthread_create failed: Resource temporarily unavailable" >&2; kill -ABRT $$`, replay.LimitMemory},
		{"killed at no limit", `kill -KILL $$`, ""},
		{"a clean exit without a result", `cat >/dev/null; exit 0`, ""},
		{"a result that is no JSON", `cat >/dev/null; echo nonsense`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := replay.Run(t.Context(), sh(c.script), roomy, []byte("x"), replay.Options{}, none)
			var le *replay.LimitError
			switch {
			case c.limit == "" && !errors.Is(err, replay.ErrWorker):
				t.Fatalf("want ErrWorker: %v", err)
			case c.limit != "" && (!errors.As(err, &le) || le.Limit != c.limit):
				t.Fatalf("want the %s limit: %v", c.limit, err)
			}
		})
	}
}
