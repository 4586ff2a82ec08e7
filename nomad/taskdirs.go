package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// OpTaskDirUsage is the Op of TaskDirUsage (one Observe call per walk).
const OpTaskDirUsage = "task_dir_usage"

// Nomad's docker driver bind-mounts three directories of the allocation
// directory into every container, read-write and without a size cap (rule
// H5): <alloc>/alloc at /alloc and <task>/local at /local on the client's
// data disk, and <task>/secrets at /secrets, a 1 MiB noexec tmpfs. Nothing
// in Nomad 1.6.5 caps the first two: TaskDirUsage measures them from the
// outside, through the client's fs/ls endpoint, which the sandbox cannot
// lie to. /secrets is not walked: the kernel bounds it to 1 MiB.

// WalkLimits bound one TaskDirUsage walk. A hostile sandbox shapes the tree
// being walked, so every dimension is bounded; reaching a bound stops the
// walk with Complete false. Zero fields take DefaultWalkLimits' values.
type WalkLimits struct {
	// MaxListings caps the fs/ls calls of one walk (one per directory).
	MaxListings int
	// MaxEntries caps the entries summed over all listings.
	MaxEntries int
	// MaxDepth caps how deep below a root (/alloc, /local) a directory is
	// listed; the roots are depth 0.
	MaxDepth int
	// MaxListingBytes caps the answer to one fs/ls call (Nomad does not
	// paginate: 2,000 entries are about 212 KB).
	MaxListingBytes int64
	// EntryBytes is counted for every entry on top of a regular file's
	// size: the inode and directory space a file costs even when empty.
	EntryBytes int64
	// Timeout bounds the whole walk (each call is also bounded by the
	// client's per-call Timeout).
	Timeout time.Duration
}

// DefaultWalkLimits returns the bounds the gateway uses. An idle sandbox
// costs one allocation read and five listings (/alloc, its data, logs and
// tmp, and /local).
func DefaultWalkLimits() WalkLimits {
	return WalkLimits{
		MaxListings:     128,
		MaxEntries:      16384,
		MaxDepth:        16,
		MaxListingBytes: 2 << 20,
		EntryBytes:      4096,
		Timeout:         20 * time.Second,
	}
}

func (l WalkLimits) withDefaults() WalkLimits {
	d := DefaultWalkLimits()
	if l.MaxListings <= 0 {
		l.MaxListings = d.MaxListings
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxListingBytes <= 0 {
		l.MaxListingBytes = d.MaxListingBytes
	}
	if l.EntryBytes < 0 {
		l.EntryBytes = 0
	} else if l.EntryBytes == 0 {
		l.EntryBytes = d.EntryBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	return l
}

// TaskDirUsage is what one walk of a task's host-disk directories found.
type TaskDirUsage struct {
	// Bytes is the apparent size of every regular file (a sparse file
	// counts in full) plus WalkLimits.EntryBytes per entry of any kind;
	// the part walked so far when Complete is false.
	Bytes int64
	// Entries counts the entries seen, directories included.
	Entries int
	// Listings counts the fs/ls calls made.
	Listings int
	// Complete is true when both trees were walked to the end. A walk that
	// reached a bound, got a malformed answer or saw the tree change under
	// it is incomplete: the caller should treat the sandbox as over quota.
	Complete bool
	// Incomplete says why the walk stopped; "" when Complete.
	Incomplete string
}

// TaskDirUsage measures what a task keeps in /alloc and /local on the
// client's disk by walking <alloc>/alloc and <task>/local with fs/ls only
// (never fs/stat, fs/cat or fs/readat: in 1.6.5 those follow a symlink out
// of the allocation directory, and stat blocks on a FIFO). It never
// descends into a symlink, FIFO, socket or device (the listing comes from
// lstat), builds every path from listed names joined with "/", and refuses
// a listed name that is empty, "." or "..", or that holds "/" or NUL (a
// directory name holding ".." too).
//
// It first reads the allocation: an unknown one is ErrNotFound, one of a job
// without the prefix ErrForbiddenJob, one that is not running or has no
// such task an *Error without sentinel. A listing below the roots that
// fails (Nomad answered 404 or 500: the directory vanished or became a file
// or symlink under the walk), a listing that gets no answer within the
// client's per-call Timeout (a directory made too large to list) and a
// malformed or oversized answer stop the walk as incomplete, unless a
// second read shows the allocation stopped (then that is the error): an
// incomplete walk must not look like a failure of Nomad, or a sandbox could
// hide from the quota behind it. A failure to list a root (Nomad answers
// 404 for a client it cannot reach), transport failures, 429 and 502-504,
// and ctx are errors. Reaching a bound of lim returns the usage so far with
// Complete false and a nil error.
func (c *Client) TaskDirUsage(ctx context.Context, allocID, task string, lim WalkLimits) (TaskDirUsage, error) {
	start := time.Now()
	u, err := c.taskDirUsage(ctx, allocID, task, lim.withDefaults())
	c.observe(OpTaskDirUsage, start, err)
	return u, err
}

func (c *Client) taskDirUsage(ctx context.Context, allocID, task string, lim WalkLimits) (TaskDirUsage, error) {
	if !validID(allocID) {
		return TaskDirUsage{}, c.newError(OpTaskDirUsage, 0, fmt.Sprintf("invalid allocation id %q", allocID), ErrNotFound)
	}
	if !safeName(task, true) {
		return TaskDirUsage{}, c.newError(OpTaskDirUsage, 0, fmt.Sprintf("invalid task name %q", task), nil)
	}
	if err := c.checkRunningTask(ctx, allocID, task); err != nil {
		return TaskDirUsage{}, err
	}
	walkCtx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	w := &walk{c: c, ctx: walkCtx, allocID: allocID, lim: lim}
	w.run([]string{"/alloc", "/" + task + "/local"})
	switch {
	case ctx.Err() != nil:
		return TaskDirUsage{}, fmt.Errorf("nomad: %s: %w", OpTaskDirUsage, ctx.Err())
	case w.err != nil:
		return TaskDirUsage{}, w.err
	case w.failed != nil:
		// Tell a stopped allocation (its directory going away) from a
		// tree that changed or grew under the walk.
		if err := c.checkRunningTask(ctx, allocID, task); err != nil {
			return TaskDirUsage{}, err
		}
	}
	w.u.Complete = w.u.Incomplete == ""
	return w.u, nil
}

// checkRunningTask reads the allocation and refuses one outside the prefix,
// not running, or without task.
func (c *Client) checkRunningTask(ctx context.Context, allocID, task string) error {
	_, err := run(ctx, c, OpTaskDirUsage, func(ctx context.Context) (struct{}, error) {
		a, _, err := c.api.Allocations().Info(allocID, query(ctx))
		if err != nil {
			return struct{}{}, err
		}
		if err := c.checkJobID(OpTaskDirUsage, a.JobID); err != nil {
			return struct{}{}, err
		}
		if a.ClientStatus != api.AllocClientStatusRunning {
			return struct{}{}, c.newError(OpTaskDirUsage, 0, fmt.Sprintf("allocation %s is %s, not running", allocID, a.ClientStatus), nil)
		}
		if _, ok := a.TaskStates[task]; !ok {
			return struct{}{}, c.newError(OpTaskDirUsage, 0, fmt.Sprintf("allocation %s has no task %q", allocID, task), nil)
		}
		return struct{}{}, nil
	})
	return err
}

// walk is the state of one breadth-first walk.
type walk struct {
	c       *Client
	ctx     context.Context
	allocID string
	lim     WalkLimits
	u       TaskDirUsage
	// err is a failure that is Nomad's (transport, 429, 502-504) or ctx's.
	err error
	// failed is the listing failure that made the walk incomplete.
	failed error
}

type walkDir struct {
	path  string
	depth int
}

// run walks the roots breadth first until done, a bound, or a failure.
func (w *walk) run(roots []string) {
	queue := make([]walkDir, 0, len(roots))
	for _, r := range roots {
		queue = append(queue, walkDir{path: r})
	}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if w.u.Listings >= w.lim.MaxListings {
			w.stop(fmt.Sprintf("more than %d directories", w.lim.MaxListings))
			return
		}
		if w.ctx.Err() != nil {
			w.stop(fmt.Sprintf("the walk took longer than %s", w.lim.Timeout))
			return
		}
		entries, ok := w.list(d)
		if !ok {
			return
		}
		for _, e := range entries {
			sub, ok := w.count(d, e)
			if !ok {
				return
			}
			if sub != "" {
				queue = append(queue, walkDir{path: sub, depth: d.depth + 1})
			}
		}
	}
}

// stop ends the walk as incomplete, keeping the first reason.
func (w *walk) stop(why string) {
	if w.u.Incomplete == "" {
		w.u.Incomplete = why
	}
}

// count adds one entry of directory d. It returns the path to list next
// when the entry is a directory, and false when the walk must stop.
func (w *walk) count(d walkDir, e *api.AllocFileInfo) (string, bool) {
	if e == nil || !safeName(e.Name, false) {
		w.stop(fmt.Sprintf("%q lists an entry with an unsafe name", d.path))
		return "", false
	}
	if e.Size < 0 {
		w.stop(fmt.Sprintf("%q has a negative size", d.path+"/"+e.Name))
		return "", false
	}
	w.u.Entries++
	if w.u.Entries > w.lim.MaxEntries {
		w.stop(fmt.Sprintf("more than %d entries", w.lim.MaxEntries))
		return "", false
	}
	add := w.lim.EntryBytes
	kind := byte(0)
	if e.FileMode != "" {
		kind = e.FileMode[0]
	}
	switch {
	case e.IsDir && kind != 'd':
		w.stop(fmt.Sprintf("%q is a directory with mode %q", d.path+"/"+e.Name, e.FileMode))
		return "", false
	case e.IsDir:
		if !safeName(e.Name, true) {
			w.stop(fmt.Sprintf("%q lists a directory with an unsafe name", d.path))
			return "", false
		}
		if d.depth+1 > w.lim.MaxDepth {
			w.stop(fmt.Sprintf("directories nested deeper than %d", w.lim.MaxDepth))
			return "", false
		}
		w.add(add)
		return d.path + "/" + e.Name, true
	case kind == '-': // a regular file: its apparent size
		add = satAdd(add, e.Size)
	}
	// Symlinks (L), FIFOs (p), sockets (S), devices (D, c): an inode, never
	// followed.
	w.add(add)
	return "", w.u.Incomplete == ""
}

func (w *walk) add(n int64) {
	w.u.Bytes = satAdd(w.u.Bytes, n)
	if w.u.Bytes == math.MaxInt64 {
		w.stop("the total overflows")
	}
}

// satAdd adds two non-negative numbers, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// list lists one directory. On a failure it records it and returns false.
func (w *walk) list(d walkDir) ([]*api.AllocFileInfo, bool) {
	p := d.path
	w.u.Listings++
	callCtx, cancel := context.WithTimeout(w.ctx, w.c.cfg.Timeout)
	defer cancel()
	files, problem, err := w.fetch(callCtx, p)
	switch {
	case err == nil && problem == "":
		return files, true
	case err == nil:
		w.failed = errors.New(problem)
		w.stop(problem)
	case w.ctx.Err() != nil:
		// The caller's ctx is checked by taskDirUsage; here only the walk's
		// own Timeout can have expired.
		w.stop(fmt.Sprintf("the walk took longer than %s", w.lim.Timeout))
	case callCtx.Err() != nil:
		w.failed = err
		w.stop(fmt.Sprintf("listing %q got no answer within %s", p, w.c.cfg.Timeout))
	default:
		err = w.c.classify(w.ctx, callCtx, OpTaskDirUsage, err)
		// The roots are mount points in the container: the sandbox can
		// neither remove nor replace them, so a failure to list one is
		// Nomad's (a client it cannot reach answers 404 "No path to node").
		if d.depth == 0 || !treeFailure(err) {
			w.err = err
			return nil, false
		}
		w.failed = err
		w.stop(fmt.Sprintf("listing %q failed: %v", p, err))
	}
	return nil, false
}

// fetch asks for one listing. problem, when not empty, says why the answer
// is not a listing the walk can use (too large, malformed).
func (w *walk) fetch(ctx context.Context, p string) ([]*api.AllocFileInfo, string, error) {
	q := query(ctx)
	q.Params = map[string]string{"path": p}
	body, err := w.c.api.Raw().Response("/v1/client/fs/ls/"+w.allocID, q)
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, w.lim.MaxListingBytes+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(raw)) > w.lim.MaxListingBytes {
		return nil, fmt.Sprintf("listing %q is larger than %d bytes", p, w.lim.MaxListingBytes), nil
	}
	var out []*api.AllocFileInfo
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Sprintf("listing %q is not a JSON list of files: %v", p, err), nil
	}
	return out, "", nil
}

// treeFailure reports a listing failure below the roots that a sandbox can
// cause: Nomad answered 404 (the directory vanished) or 500 (it became a
// file or a symlink). Transport failures and 429, 502, 503, 504 are Nomad's.
func treeFailure(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusInternalServerError)
}

// safeName reports whether a listed name may be used: not empty, not "." or
// "..", without "/" or NUL; for a directory (which becomes part of a path)
// also without "..".
func safeName(name string, dir bool) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return false
	}
	return !dir || !strings.Contains(name, "..")
}
