package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// logFrameSize caps the data of one log StreamFrame (Nomad's framer batches
// up to 64 KiB).
const logFrameSize = 64 << 10

// taskLogs are the two log files of one task.
type taskLogs struct {
	stdout *logFile
	stderr *logFile
}

func newTaskLogs() *taskLogs {
	return &taskLogs{stdout: newLogFile(), stderr: newLogFile()}
}

// logFile is an append-only log with change notification. finish marks the
// task dead, which ends followed streams once they have sent everything.
type logFile struct {
	mu      sync.Mutex
	data    []byte
	done    bool
	changed chan struct{} // closed (and replaced) on every change
}

func newLogFile() *logFile { return &logFile{changed: make(chan struct{})} }

func (f *logFile) append(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, b...)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *logFile) finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.done = true
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// read returns the bytes from offset on, the file size, whether the task is
// dead and a channel that is closed on the next change.
func (f *logFile) read(from int64) ([]byte, int64, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := int64(len(f.data))
	if from > size {
		from = size
	}
	return f.data[from:size:size], size, f.done, f.changed
}

// AppendTaskLog appends data to the stdout or stderr log of the first task
// of an allocation, waking followed log streams. It fails for an unknown
// allocation or stream name.
func (s *Server) AppendTaskLog(allocID, stream string, data []byte) error {
	s.mu.Lock()
	sa := s.allocs[allocID]
	s.mu.Unlock()
	if sa == nil {
		return fmt.Errorf("nomadsim: %s", errUnknownAlloc(allocID))
	}
	logs := sa.logs[sa.tasks[0]]
	switch stream {
	case "stdout":
		logs.stdout.append(data)
	case "stderr":
		logs.stderr.append(data)
	default:
		return fmt.Errorf("nomadsim: unknown log stream %q", stream)
	}
	return nil
}

// streamFrame is Nomad's StreamFrame with the server's key order (Data,
// File, Offset), so the bytes match logs-*.json exactly.
type streamFrame struct {
	Data      []byte `json:",omitempty"`
	File      string `json:",omitempty"`
	Offset    int64  `json:",omitempty"`
	FileEvent string `json:",omitempty"`
}

// handleLogs serves GET /v1/client/fs/logs/<alloc>: plain=true writes the
// bytes, plain=false StreamFrame objects back to back (Offset = end of the
// chunk); origin=end&offset=N starts N bytes before the end; follow=true
// keeps streaming appended data and sends `{}` every LogHeartbeat until the
// client leaves or the task dies. Parameter errors use the agent's texts.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	id := pathTail(r, "/v1/client/fs/logs/")
	q := r.URL.Query()
	task, typ := q.Get("task"), q.Get("type")
	var follow, plain bool
	var offset int64
	var err error
	fail := func(msg string) { writeError(w, r, http.StatusBadRequest, msg) }
	switch {
	case id == "":
		fail("must provide a valid alloc id")
		return
	case task == "":
		fail("must provide task name")
		return
	}
	if v := q.Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			fail(fmt.Sprintf("failed to parse follow field to boolean: %v", err))
			return
		}
	}
	if v := q.Get("plain"); v != "" {
		if plain, err = strconv.ParseBool(v); err != nil {
			fail(fmt.Sprintf("failed to parse plain field to boolean: %v", err))
			return
		}
	}
	if typ != "stdout" && typ != "stderr" {
		fail("must provide log type (stdout/stderr)")
		return
	}
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.ParseInt(v, 10, 64); err != nil {
			fail(fmt.Sprintf("error parsing offset: %v", err))
			return
		}
	}
	origin := q.Get("origin")
	switch origin {
	case "":
		origin = "start"
	case "start", "end":
	default:
		fail("origin must be start or end")
		return
	}
	// Like the agent, fix the Content-Type before looking anything up: the
	// 404 of error-logs-unknown-alloc.json is text/plain.
	if plain {
		w.Header().Set("Content-Type", "text/plain")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	s.mu.Lock()
	sa := s.allocs[id]
	var logs *taskLogs
	var started bool
	var group string
	var unreachable bool
	if sa != nil {
		logs, group = sa.logs[task], sa.a.TaskGroup
		unreachable = s.nodeUnreachableLocked(sa.a.NodeID)
		if ts := sa.a.TaskStates[task]; ts != nil {
			started = !ts.StartedAt.IsZero()
		}
	}
	s.mu.Unlock()
	switch {
	case sa == nil:
		writeError(w, r, http.StatusNotFound, errUnknownAlloc(id))
		return
	case unreachable:
		writeError(w, r, http.StatusNotFound, errNoPathToNode) // real-lost-logs-node-down.json
		return
	case logs == nil:
		writeError(w, r, http.StatusNotFound, fmt.Sprintf("task group %q does not have task with name %q", group, task))
		return
	case !started:
		writeError(w, r, http.StatusNotFound, fmt.Sprintf("task %q not started yet. No logs available", task))
		return
	}
	file := logs.stdout
	if typ == "stderr" {
		file = logs.stderr
	}
	s.streamLog(w, r, file, fmt.Sprintf("alloc/logs/%s.%s.0", task, typ), origin, offset, plain, follow)
}

func (s *Server) streamLog(w http.ResponseWriter, r *http.Request, f *logFile, name, origin string, offset int64, plain, follow bool) {
	_, size, _, _ := f.read(0)
	pos := min(max(offset, 0), size)
	if origin == "end" {
		pos = size - pos
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	var tick <-chan time.Time
	if follow {
		t := time.NewTicker(s.cfg.LogHeartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		data, end, done, changed := f.read(pos)
		for len(data) > 0 {
			n := min(len(data), logFrameSize)
			pos += int64(n)
			if err := writeLogChunk(w, data[:n], name, pos, plain); err != nil {
				return
			}
			data = data[n:]
		}
		pos = end
		flush()
		if !follow || done {
			return
		}
		select {
		case <-changed:
		case <-tick:
			if !plain {
				if _, err := w.Write([]byte("{}")); err != nil {
					return
				}
				flush()
			}
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

func writeLogChunk(w http.ResponseWriter, chunk []byte, name string, end int64, plain bool) error {
	if plain {
		_, err := w.Write(chunk)
		return err
	}
	b, err := json.Marshal(streamFrame{Data: chunk, File: name, Offset: end})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
