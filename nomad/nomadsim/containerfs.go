package nomadsim

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"sandgate/render/fileops"
)

// containerFS is the in-memory filesystem of one simulated task's
// container: what the builtins cat, ln and mkdir and the gateway's file
// operations (render/fileops, emulated by biFiles) read and write. It is
// not the allocation directory that Nomad's fs API shows (fs.go): that one
// is on the host, this one inside the container. A new container holds
// /bin, /etc/passwd, /tmp and /workspace, all empty but for the passwd
// line. Deviations: one owner, no devices, FIFOs or sockets, no size limit
// but memory.
type containerFS struct {
	mu    sync.Mutex
	nodes map[string]*fsNode // by clean absolute path
	now   func() time.Time
}

type fsNode struct {
	dir    bool
	link   string // a symbolic link's target, as written
	data   []byte
	mode   uint32
	mtime  time.Time
	isLink bool
	image  bool // part of the image, not written by the sandbox
}

func newContainerFS(now func() time.Time) *containerFS {
	t := now()
	fs := &containerFS{nodes: map[string]*fsNode{}, now: now}
	for _, d := range []string{"/", "/bin", "/etc", "/tmp", "/workspace"} {
		fs.nodes[d] = &fsNode{dir: true, mode: 0o755, mtime: t}
	}
	fs.nodes["/tmp"].mode = 0o777
	fs.nodes["/etc/passwd"] = &fsNode{data: []byte("root:x:0:0:root:/root:/bin/sh\n"), mode: 0o644, mtime: t, image: true}
	return fs
}

// The errors' texts are strerror's, as coreutils prints them.
var (
	errNoEnt  = errors.New("No such file or directory")         //nolint:staticcheck // ST1005: strerror's wording
	errNotDir = errors.New("Not a directory")                   //nolint:staticcheck // ST1005: strerror's wording
	errLoop   = errors.New("Too many levels of symbolic links") //nolint:staticcheck // ST1005: strerror's wording
	errIsDir  = errors.New("Is a directory")                    //nolint:staticcheck // ST1005: strerror's wording
)

// resolve returns the real path of p (absolute, clean), following every
// symbolic link on the way and, when last is true, the final one too;
// readlink -f, which also fails on a link that does not resolve.
func (fs *containerFS) resolve(p string, last bool) (string, error) {
	return fs.resolveDepth(p, last, 0)
}

func (fs *containerFS) resolveDepth(p string, last bool, depth int) (string, error) {
	if depth > 40 {
		return "", errLoop
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		if part == "" {
			continue
		}
		next := path.Join(cur, part)
		if part == ".." {
			next = path.Dir(cur)
		}
		n, ok := fs.nodes[next]
		if !ok {
			return "", errNoEnt
		}
		if n.isLink && (last || i < len(parts)-1) {
			target := n.link
			if !strings.HasPrefix(target, "/") {
				target = path.Join(cur, target)
			}
			r, err := fs.resolveDepth(target, true, depth+1)
			if err != nil {
				return "", err
			}
			next = r
			n = fs.nodes[r]
		}
		if i < len(parts)-1 && !n.dir {
			return "", errNotDir
		}
		cur = next
	}
	return cur, nil
}

// stat follows links; lstat does not follow the last one.
func (fs *containerFS) stat(p string) (string, *fsNode, bool) {
	r, err := fs.resolve(p, true)
	if err != nil {
		return "", nil, false
	}
	return r, fs.nodes[r], true
}

func (fs *containerFS) lstat(p string) (string, *fsNode, bool) {
	dir, err := fs.resolve(path.Dir(path.Clean(p)), true)
	if err != nil {
		return "", nil, false
	}
	full := path.Join(dir, path.Base(path.Clean(p)))
	if path.Clean(p) == "/" {
		full = "/"
	}
	n, ok := fs.nodes[full]
	return full, n, ok
}

// heldBytes sums the sizes of the regular files the sandbox wrote: those under /workspace
// and /tmp (the sandbox's tmpfs areas, host memory) and the rest (the
// container's writable layer, host disk).
func (fs *containerFS) heldBytes() (tmpfs, rest uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for p, n := range fs.nodes {
		if n.dir || n.isLink || n.image {
			continue
		}
		if strings.HasPrefix(p, "/workspace/") || strings.HasPrefix(p, "/tmp/") {
			tmpfs += uint64(len(n.data))
		} else {
			rest += uint64(len(n.data))
		}
	}
	return tmpfs, rest
}

// chdirCheck is nil when cd p would succeed: p resolves to a directory.
func (fs *containerFS) chdirCheck(p string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	r, err := fs.resolve(p, true)
	if err != nil {
		return err
	}
	if !fs.nodes[r].dir {
		return errNotDir
	}
	return nil
}

// mkdirAll creates p and its missing parents (mkdir -p).
func (fs *containerFS) mkdirAll(p string) error {
	if r, n, ok := fs.stat(p); ok {
		if !n.dir {
			return fmt.Errorf("%s: %w", r, errNotDir)
		}
		return nil
	}
	if err := fs.mkdirAll(path.Dir(p)); err != nil {
		return err
	}
	full, _, _ := fs.lstat(p)
	if full == "" {
		return errNoEnt
	}
	fs.nodes[full] = &fsNode{dir: true, mode: 0o755, mtime: fs.now()}
	return nil
}

// children returns the names directly in directory dir (a real path).
func (fs *containerFS) children(dir string) []string {
	var out []string
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for p := range fs.nodes {
		if p != "/" && strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
			out = append(out, p[len(prefix):])
		}
	}
	return out
}

func (fs *containerFS) removeAll(p string) {
	prefix := p + "/"
	for k := range fs.nodes {
		if k == p || strings.HasPrefix(k, prefix) {
			delete(fs.nodes, k)
		}
	}
}

// ReadContainerFile returns a file of allocID's container, following
// links: for tests that check what a write left.
func (s *Server) ReadContainerFile(allocID, name string) ([]byte, bool) {
	s.mu.Lock()
	sa := s.allocs[allocID]
	s.mu.Unlock()
	if sa == nil {
		return nil, false
	}
	fs := sa.containerFS(time.Now)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, n, ok := fs.stat(name)
	if !ok || n.dir {
		return nil, false
	}
	return slices.Clone(n.data), true
}

// containerFS returns the allocation's container filesystem, made on first
// use.
func (sa *simAlloc) containerFS(now func() time.Time) *containerFS {
	sa.fsOnce.Do(func() { sa.cfs = newContainerFS(now) })
	return sa.cfs
}

// biFiles emulates the gateway's file operations script
// (render/fileops.Script) step by step: the same checks in the same order,
// the same exit statuses, the same output.
func biFiles(p *proc, r fileops.Request) int {
	fs := p.fs
	fail := func(code int, msg string) int {
		p.errf("%s: %s\n", r.Path, msg)
		return code
	}
	under := func(u string) bool {
		for _, root := range r.Roots {
			if strings.HasPrefix(u+"/", root+"/") {
				return true
			}
		}
		return false
	}
	var data []byte
	if r.Op == fileops.OpPut { // read stdin before taking the lock
		b, err := io.ReadAll(p.stdin)
		if p.killed() || errors.Is(err, errKilled) {
			return exitKilled
		}
		data = b
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, b := path.Dir(r.Path), path.Base(r.Path)
	a, rest := d, ""
	for {
		if _, n, ok := fs.stat(a); ok && n.dir {
			break
		}
		if _, n, ok := fs.lstat(a); ok && n.isLink {
			return fail(fileops.ExitEscapes, a+" is a symbolic link that does not resolve")
		}
		if _, _, ok := fs.stat(a); ok {
			return fail(fileops.ExitNotDir, a+" is not a directory")
		}
		if r.Op != fileops.OpPut {
			return fail(fileops.ExitNotFound, "no such file or directory")
		}
		rest = "/" + path.Base(a) + rest
		a = path.Dir(a)
	}
	ra, _ := fs.resolve(a, true)
	if ra == "/" {
		ra = ""
	}
	if r.Op != fileops.OpGet && !under(ra+rest) {
		return fail(fileops.ExitEscapes, fmt.Sprintf("%s resolves to %s%s, outside the allowed roots", d, ra, rest))
	}
	t := ra + rest + "/" + b
	switch r.Op {
	case fileops.OpPut:
		if _, n, ok := fs.lstat(t); ok && n.isLink {
			rt, err := fs.resolve(t, true)
			if err != nil {
				return fail(fileops.ExitEscapes, "a symbolic link that does not resolve")
			}
			if !under(rt) {
				return fail(fileops.ExitEscapes, "resolves to "+rt+", outside the allowed roots")
			}
			t = rt
		}
		if _, n, ok := fs.stat(t); ok && n.dir {
			return fail(fileops.ExitIsDirectory, "is a directory")
		}
		if rest != "" {
			if err := fs.mkdirAll(ra + rest); err != nil {
				return fail(fileops.ExitWriteFailed, "cannot create its directory")
			}
		}
		if int64(len(data)) != r.Size {
			return fail(fileops.ExitShort, fmt.Sprintf("received %d of %d bytes; nothing was written", len(data), r.Size))
		}
		n := &fsNode{data: data, mode: r.Mode, mtime: fs.now()}
		fs.nodes[t] = n
		_, _ = fmt.Fprintf(p.stdout, "%d %o %d\n", len(n.data), n.mode, n.mtime.Unix())
		return 0
	case fileops.OpGet:
		if _, _, ok := fs.stat(t); !ok {
			if _, n, ok := fs.lstat(t); ok && n.isLink {
				return fail(fileops.ExitEscapes, "a symbolic link that does not resolve")
			}
			return fail(fileops.ExitNotFound, "no such file or directory")
		}
		rt, n, _ := fs.stat(t)
		if !under(rt) {
			return fail(fileops.ExitEscapes, "resolves to "+rt+", outside the allowed roots")
		}
		if !n.dir {
			size := int64(len(n.data))
			off := min(r.Offset, size)
			w := size - off
			if r.Length > 0 && r.Length < w {
				w = r.Length
			}
			if w > r.MaxBytes {
				if w == size {
					return fail(fileops.ExitTooLarge, fmt.Sprintf("is %d bytes, more than the %d a read returns", size, r.MaxBytes))
				}
				return fail(fileops.ExitTooLarge, fmt.Sprintf("is %d bytes: the %d asked for from %d are more than the %d a read returns", size, w, r.Offset, r.MaxBytes))
			}
			_, _ = fmt.Fprintf(p.stdout, "F %d %o %d %d %d\n", size, n.mode, n.mtime.Unix(), r.Offset, w)
			_, _ = p.stdout.Write(n.data[off : off+w])
			return 0
		}
		names := globOrder(fs.children(rt))
		listed := names[:min(len(names), r.MaxEntries)]
		_, _ = fmt.Fprintf(p.stdout, "D %d %d\n", len(names), len(listed))
		var stats, lines strings.Builder
		for _, name := range listed {
			c := fs.nodes[path.Join(rt, name)]
			e := fileops.Entry{Name: name, Type: "file", Stat: fileops.Stat{Size: int64(len(c.data)), Mode: c.mode, ModTime: c.mtime}}
			switch {
			case c.isLink:
				e.Type, e.Size, e.Mode = "symlink", int64(len(c.link)), 0o777
			case c.dir:
				e.Type, e.Size = "dir", 4096
			}
			st, nl := fileops.FormatEntry(e)
			stats.WriteString(st + "\n")
			lines.WriteString(nl + "\n")
		}
		_, _ = io.WriteString(p.stdout, stats.String()+lines.String())
		return 0
	case fileops.OpDelete:
		_, n, ok := fs.lstat(t)
		switch {
		case !ok:
			return fail(fileops.ExitNotFound, "no such file or directory")
		case n.isLink || !n.dir:
			delete(fs.nodes, t)
		case r.Recursive:
			fs.removeAll(t)
		case len(fs.children(t)) > 0:
			return fail(fileops.ExitNotEmpty, "is a directory that is not empty (recursive=true removes it and what it holds)")
		default:
			delete(fs.nodes, t)
		}
		return 0
	}
	return 2
}

// globOrder sorts names as `* .[!.]* ..?*` expands them: names without a
// leading dot, then dot names, each in byte order.
func globOrder(names []string) []string {
	var plain, dot []string
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			dot = append(dot, n)
		} else {
			plain = append(plain, n)
		}
	}
	slices.Sort(plain)
	slices.Sort(dot)
	return append(plain, dot...)
}

// biLn is `ln -s TARGET NAME`: a symbolic link (the only kind the
// simulated container has).
func biLn(p *proc) int {
	args := p.args[1:]
	if len(args) != 3 || args[0] != "-s" {
		p.errf("ln: simulated ln supports only ln -s TARGET NAME\n")
		return 1
	}
	fs := p.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	full, _, exists := fs.lstat(p.abs(args[2]))
	switch {
	case full == "":
		p.errf("ln: failed to create symbolic link '%s': No such file or directory\n", args[2])
		return 1
	case exists:
		p.errf("ln: failed to create symbolic link '%s': File exists\n", args[2])
		return 1
	}
	fs.nodes[full] = &fsNode{isLink: true, link: args[1], mode: 0o777, mtime: fs.now()}
	return 0
}

// biMkdir is `mkdir [-p] DIR...`.
func biMkdir(p *proc) int {
	args := p.args[1:]
	parents := len(args) > 0 && args[0] == "-p"
	if parents {
		args = args[1:]
	}
	fs := p.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	status := 0
	for _, a := range args {
		d := p.abs(a)
		if parents {
			if err := fs.mkdirAll(d); err != nil {
				p.errf("mkdir: cannot create directory '%s': %v\n", a, errors.Unwrap(err))
				status = 1
			}
			continue
		}
		full, _, exists := fs.lstat(d)
		if full == "" || exists {
			p.errf("mkdir: cannot create directory '%s': %s\n", a, map[bool]string{true: "File exists", false: "No such file or directory"}[exists])
			status = 1
			continue
		}
		fs.nodes[full] = &fsNode{dir: true, mode: 0o755, mtime: fs.now()}
	}
	return status
}

// readFile is what cat FILE reads.
func (p *proc) readFile(name string) ([]byte, error) {
	fs := p.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	r, err := fs.resolve(p.abs(name), true)
	if err != nil {
		return nil, err
	}
	n := fs.nodes[r]
	if n.dir {
		return nil, errIsDir
	}
	return slices.Clone(n.data), nil
}

// abs makes name absolute against the process's working directory.
func (p *proc) abs(name string) string {
	if strings.HasPrefix(name, "/") {
		return path.Clean(name)
	}
	return path.Join(p.cwd, name)
}
