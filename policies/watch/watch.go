// Package watch reloads the policy engine's bundle when it changes: on a
// trigger (the gateway sends one on SIGHUP) and, with Watch set, when a file
// of the bundle directory or the bundle file changes (fsnotify). Each
// reload goes through policies.Engine.Reload, which builds, verifies the
// signature, runs the bundle's own tests and every check the engine makes
// before it swaps; a refused bundle is reported and the old one keeps
// serving.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"sandgate/policies"
)

// DefaultSettle is how long a burst of file events must be quiet before
// the reload starts: an editor or `git checkout` writes several files, and
// a half-written bundle would only be refused.
const DefaultSettle = 300 * time.Millisecond

// Result is the outcome of one reload.
type Result struct {
	Cause    string // "signal" or "file"
	Took     time.Duration
	Revision string // the revision serving after the attempt
	Digest   string
	Err      error // nil: the new bundle serves; else it was refused
}

// Config says what to reload and how to report it.
type Config struct {
	Engine *policies.Engine
	// Source is where the bundle comes from (Dir or BundleFile, and the
	// verification key); the embedded bundle cannot change, so a Source
	// naming neither is an error.
	Source policies.Config
	// Watch enables reloading on file changes, beside the trigger.
	Watch bool
	// Settle overrides DefaultSettle.
	Settle time.Duration
	// Report receives every result (required).
	Report func(Result)
}

// Run reloads on every value of trigger and, with Watch, on file changes,
// until ctx is done. It returns an error only when it cannot start.
func Run(ctx context.Context, cfg Config, trigger <-chan struct{}) error {
	if cfg.Engine == nil || cfg.Report == nil {
		return errors.New("watch: Engine and Report are required")
	}
	if cfg.Source.Dir == "" && cfg.Source.BundleFile == "" {
		return errors.New("watch: the embedded bundle cannot be reloaded; serve a policy directory or bundle file")
	}
	settle := cfg.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if cfg.Watch {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		defer func() { _ = w.Close() }()
		if err := addWatches(w, cfg.Source); err != nil {
			return err
		}
		events, errs = w.Events, w.Errors
		// New subdirectories of a bundle directory are watched as they appear.
		if cfg.Source.Dir != "" {
			inner := make(chan fsnotify.Event)
			go func() {
				defer close(inner)
				for ev := range w.Events {
					if ev.Has(fsnotify.Create) {
						if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
							_ = w.Add(ev.Name)
						}
					}
					select {
					case inner <- ev:
					case <-ctx.Done():
						return
					}
				}
			}()
			events = inner
		}
	}
	var timer *time.Timer
	var settled <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-trigger:
			if !ok {
				trigger = nil
				continue
			}
			cfg.Report(reload(ctx, cfg, "signal"))
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if !relevant(cfg.Source, ev) {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(settle)
			} else {
				timer.Reset(settle)
			}
			settled = timer.C
		case <-settled:
			settled = nil
			cfg.Report(reload(ctx, cfg, "file"))
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			cfg.Report(Result{Cause: "file", Err: fmt.Errorf("watch: %w", err), Revision: cfg.Engine.Revision(), Digest: cfg.Engine.Info().Digest})
		}
	}
}

func reload(ctx context.Context, cfg Config, cause string) Result {
	start := time.Now()
	err := cfg.Engine.Reload(ctx, cfg.Source)
	info := cfg.Engine.Info()
	return Result{Cause: cause, Took: time.Since(start), Revision: info.Revision, Digest: info.Digest, Err: err}
}

// addWatches watches the bundle directory and every directory under it,
// or the directory holding the bundle file (a file replaced by rename,
// as `sandgate policy build` does, is seen only there).
func addWatches(w *fsnotify.Watcher, src policies.Config) error {
	if src.BundleFile != "" {
		if err := w.Add(filepath.Dir(src.BundleFile)); err != nil {
			return fmt.Errorf("watch %s: %w", filepath.Dir(src.BundleFile), err)
		}
		return nil
	}
	return filepath.WalkDir(src.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if err := w.Add(p); err != nil {
			return fmt.Errorf("watch %s: %w", p, err)
		}
		return nil
	})
}

// relevant tells whether an event can change the bundle: any change under
// the directory, or a change of the bundle file itself.
func relevant(src policies.Config, ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	if src.BundleFile != "" {
		return filepath.Clean(ev.Name) == filepath.Clean(src.BundleFile)
	}
	return true
}
