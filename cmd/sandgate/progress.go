package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows that a long call is under way, on stderr. On a terminal
// one line is redrawn in place every second ("creating sandbox on
// worker-1 3s"); elsewhere (a pipe, a log file) the first message is
// written once, as one line, and nothing else.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	now   func() time.Time

	mu   sync.Mutex
	msg  string
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startProgress starts a progress line on w with a one-second ticker.
func startProgress(w io.Writer, msg string) *progress {
	if !isTerminal(w) {
		return newProgress(w, msg, false, nil, time.Now)
	}
	tick := time.NewTicker(time.Second)
	p := newProgress(w, msg, true, tick.C, time.Now)
	go func() { <-p.done; tick.Stop() }()
	return p
}

// newProgress is startProgress with the terminal test, the ticks and the
// clock given (tests).
func newProgress(w io.Writer, msg string, tty bool, tick <-chan time.Time, now func() time.Time) *progress {
	p := &progress{w: w, tty: tty, now: now, start: now(), msg: msg, stop: make(chan struct{}), done: make(chan struct{})}
	if !tty {
		fmt.Fprintln(w, msg)
		close(p.done)
		return p
	}
	p.draw()
	go p.loop(tick)
	return p
}

func (p *progress) loop(tick <-chan time.Time) {
	defer close(p.done)
	for {
		select {
		case <-tick:
			p.draw()
		case <-p.stop:
			fmt.Fprint(p.w, "\r\033[K") // leave a clean line for what follows
			return
		}
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	msg := p.msg
	p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K%s %ds", msg, int(p.now().Sub(p.start).Seconds()))
}

// set changes the message; on a terminal the next redraw shows it.
func (p *progress) set(msg string) {
	p.mu.Lock()
	p.msg = msg
	p.mu.Unlock()
}

// finish clears the line (on a terminal) and stops; it is safe to call twice.
func (p *progress) finish() {
	p.once.Do(func() {
		if p.tty {
			close(p.stop)
		}
	})
	<-p.done
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
