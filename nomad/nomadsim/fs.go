package nomadsim

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// This file serves GET /v1/client/fs/ls/<alloc_id>?path=<p>: one level of an
// allocation's directory, as a v1.6.5 client lists it (checked on a real
// agent with the docker driver, 2026-12-01):
//
//   - the answer is a JSON array of {FileMode, IsDir, ModTime, Name, Size}
//     (api.AllocFileInfo without ContentType, which only fs/stat sets),
//     sorted by name, with no X-Nomad-* headers; an empty directory is [];
//   - entries come from lstat: a symlink is "Lrwxrwxrwx", IsDir false, Size
//     the length of its target; a FIFO "prw-------", a socket "Srwx...";
//   - the root "/" holds alloc/{data,logs,tmp} and <task>/{local,private,
//     secrets,tmp}; alloc/logs holds the hidden .<task>.std{out,err}.fifo
//     pipes and <task>.std{out,err}.0; secrets holds .nomad-mount;
//   - an unknown allocation is 404 `Unknown allocation "<id>"`, an id that
//     is not 36 characters a 500, a missing path 404 and a path that is not
//     a directory 500 (both "open <host path>: ..."), a path with ".." that
//     leaves the directory 500 "Path escapes the alloc directory".
//
// Deviations: the simulated tree exists only in memory and holds only the
// skeleton above, the simulated log files (their sizes are the task logs')
// and what a test put there with WriteTaskFile or PutTaskFile. The real
// client follows a symlink named in ?path= (it opens the path); the
// simulator never does and answers "not a directory".

// simHostAllocDir is the host directory the simulated client claims to keep
// allocations in (it appears in error messages only).
const simHostAllocDir = "/var/lib/nomad/alloc"

// Nomad's texts for the failures of a listing.
const (
	errPathEscapes = "Path escapes the alloc directory"
	errBadUUID     = "alloc lookup failed: index error: UUID must be 36 characters"
)

// simEntry is one entry of a simulated allocation directory.
type simEntry struct {
	mode    fs.FileMode
	size    int64
	modTime time.Time
}

// simDir is the simulated directory tree of one allocation: entries by
// slash-separated path relative to the allocation directory ("alloc/logs").
type simDir map[string]*simEntry

// dirSize is what ls reports as the Size of a directory on ext4.
const dirSize = 4096

// taskDirLocked returns the tree of sa, building its skeleton on first use.
// Callers hold Server.mu.
func (s *Server) taskDirLocked(sa *simAlloc) simDir {
	if s.taskDirs == nil {
		s.taskDirs = map[string]simDir{}
	}
	if d, ok := s.taskDirs[sa.a.ID]; ok {
		return d
	}
	at := time.Unix(0, sa.a.CreateTime).UTC()
	d := simDir{}
	dir := func(p string, mode fs.FileMode, size int64) {
		d[p] = &simEntry{mode: fs.ModeDir | mode, size: size, modTime: at}
	}
	dir("alloc", 0o777, dirSize)
	for _, sub := range []string{"data", "logs", "tmp"} {
		dir("alloc/"+sub, 0o777, dirSize)
	}
	for _, task := range sa.tasks {
		dir(task, 0o777, dirSize)
		dir(task+"/local", 0o777, dirSize)
		dir(task+"/private", 0o777, 60) // tmpfs
		dir(task+"/secrets", 0o777, 60) // tmpfs, 1 MiB, noexec
		dir(task+"/tmp", fs.ModeSticky|0o777, dirSize)
		d[task+"/secrets/.nomad-mount"] = &simEntry{mode: 0o644, modTime: at}
		for _, stream := range []string{"stdout", "stderr"} {
			d["alloc/logs/."+task+"."+stream+".fifo"] = &simEntry{mode: fs.ModeNamedPipe | 0o600, modTime: at}
		}
	}
	s.taskDirs[sa.a.ID] = d
	return d
}

// list returns the entries directly under dir ("" is the root), sorted by
// name.
func (d simDir) list(dir string) []*api.AllocFileInfo {
	prefix := dir + "/"
	if dir == "" {
		prefix = ""
	}
	out := []*api.AllocFileInfo{}
	for p, e := range d {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" || strings.Contains(rest, "/") {
			continue
		}
		out = append(out, e.info(rest))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (e *simEntry) info(name string) *api.AllocFileInfo {
	return &api.AllocFileInfo{
		Name: name, IsDir: e.mode.IsDir(), Size: e.size,
		FileMode: e.mode.String(), ModTime: e.modTime,
	}
}

// cleanAllocPath resolves a ?path= the way the client does: relative to the
// allocation directory, "" and "/" being its root. ok is false when the
// path leaves the directory.
func cleanAllocPath(p string) (string, bool) {
	const base = "/base"
	c := path.Clean(base + "/" + p)
	if c == base {
		return "", true
	}
	rest, ok := strings.CutPrefix(c, base+"/")
	return rest, ok
}

// handleFSList serves GET /v1/client/fs/ls/<alloc_id>?path=<p>.
func (s *Server) handleFSList(w http.ResponseWriter, r *http.Request) {
	id := pathTail(r, "/v1/client/fs/ls/")
	rel, ok := cleanAllocPath(r.URL.Query().Get("path"))
	s.mu.Lock()
	sa := s.allocs[id]
	var (
		out    []*api.AllocFileInfo
		status int
		msg    string
	)
	switch {
	case sa == nil && len(id) != 36:
		status, msg = http.StatusInternalServerError, errBadUUID
	case sa == nil:
		status, msg = http.StatusNotFound, errUnknownAlloc(id)
	case !ok:
		status, msg = http.StatusInternalServerError, errPathEscapes
	default:
		d := s.taskDirLocked(sa)
		host := path.Join(simHostAllocDir, id, rel)
		if e, found := d[rel]; rel != "" && !found {
			status, msg = http.StatusNotFound, "open "+host+": no such file or directory"
		} else if rel != "" && !e.mode.IsDir() {
			status, msg = http.StatusInternalServerError, "open "+host+": not a directory"
		} else {
			out = d.list(rel)
			s.addLogFilesLocked(sa, rel, &out)
		}
	}
	s.mu.Unlock()
	if status != 0 {
		writeError(w, r, status, msg)
		return
	}
	body := make([]any, 0, len(out))
	for _, f := range out {
		o := toObj(f)
		delete(o, "ContentType") // set by fs/stat only
		body = append(body, o)
	}
	writeJSON(w, http.StatusOK, metaNone, 0, body)
}

// addLogFilesLocked adds the task log files, sized as the simulated logs
// are, to a listing of alloc/logs.
func (s *Server) addLogFilesLocked(sa *simAlloc, rel string, out *[]*api.AllocFileInfo) {
	if rel != "alloc/logs" {
		return
	}
	at := time.Unix(0, sa.a.CreateTime).UTC()
	for _, task := range sa.tasks {
		l := sa.logs[task]
		if l == nil {
			continue
		}
		for stream, f := range map[string]*logFile{"stdout": l.stdout, "stderr": l.stderr} {
			_, size, _, _ := f.read(0)
			e := &simEntry{mode: 0o644, size: size, modTime: at}
			*out = append(*out, e.info(task+"."+stream+".0"))
		}
	}
	sort.Slice(*out, func(i, j int) bool { return (*out)[i].Name < (*out)[j].Name })
}

// WriteTaskFile puts a regular file of size bytes at p in an allocation's
// directory, as a sandbox writing to /local (p "sandbox/local/big") or
// /alloc (p "alloc/data/big") would; nothing is written anywhere, the
// simulated listing just reports it (its apparent size: a sparse file
// counts in full, as on the real agent). Missing parent directories are
// created. It fails for an unknown allocation, a path that leaves the
// directory or names the root, a parent that is not a directory, and a
// negative size.
func (s *Server) WriteTaskFile(allocID, p string, size int64) error {
	return s.PutTaskFile(allocID, p, 0o644, size)
}

// PutTaskFile is WriteTaskFile for an entry of any kind: mode carries the
// type bits (fs.ModeDir, fs.ModeSymlink, fs.ModeNamedPipe, fs.ModeSocket,
// fs.ModeDevice, none for a regular file) and the permissions. size is what
// the listing reports (for a symlink, the length of its target). An
// existing entry is replaced; replacing a directory removes what it held.
func (s *Server) PutTaskFile(allocID, p string, mode fs.FileMode, size int64) error {
	rel, ok := cleanAllocPath(p)
	if !ok || rel == "" {
		return fmt.Errorf("nomadsim: task file path %q is not inside the allocation directory", p)
	}
	if size < 0 {
		return errors.New("nomadsim: negative task file size")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sa := s.allocs[allocID]
	if sa == nil {
		return fmt.Errorf("nomadsim: %s", errUnknownAlloc(allocID))
	}
	d := s.taskDirLocked(sa)
	now := time.Now().UTC()
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		parent := strings.Join(parts[:i], "/")
		e, found := d[parent]
		if !found {
			d[parent] = &simEntry{mode: fs.ModeDir | 0o755, size: dirSize, modTime: now}
			continue
		}
		if !e.mode.IsDir() {
			return fmt.Errorf("nomadsim: %s is not a directory", parent)
		}
	}
	removeTree(d, rel)
	d[rel] = &simEntry{mode: mode, size: size, modTime: now}
	return nil
}

// RemoveTaskFile removes p, and everything under it, from an allocation's
// directory. Removing a missing path is not an error.
func (s *Server) RemoveTaskFile(allocID, p string) error {
	rel, ok := cleanAllocPath(p)
	if !ok || rel == "" {
		return fmt.Errorf("nomadsim: task file path %q is not inside the allocation directory", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sa := s.allocs[allocID]
	if sa == nil {
		return fmt.Errorf("nomadsim: %s", errUnknownAlloc(allocID))
	}
	removeTree(s.taskDirLocked(sa), rel)
	return nil
}

func removeTree(d simDir, rel string) {
	delete(d, rel)
	for p := range d {
		if strings.HasPrefix(p, rel+"/") {
			delete(d, p)
		}
	}
}
