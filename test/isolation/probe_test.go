package isolation

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// probeTimeout bounds each probe: a dropped packet shows as a timeout.
const probeTimeout = time.Second

// target is one test host service that a probe from the sandbox tries.
type target struct {
	what  string // what it stands for, e.g. "metadata"
	proto string // tcp or udp
	addr  string // ip:port, owned by ns
	ns    string // the netns serving it
	// rule is the comment of the rule that must drop the probe once the
	// bundle is applied; "" for a target that must stay reachable.
	rule string
}

// banner is what the target's server answers, so that a probe knows the
// right server replied.
func (tg target) banner() string { return tg.proto + " " + tg.addr + " " + tg.what }

// serve starts tg's server in its netns until the test ends.
func serve(t *testing.T, tg target) {
	t.Helper()
	var closer func() error
	err := inNetns(tg.ns, func() error {
		if tg.proto == "udp" {
			pc, err := net.ListenPacket("udp", tg.addr)
			if err != nil {
				return err
			}
			closer = pc.Close
			go func() {
				buf := make([]byte, 64)
				for {
					_, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo([]byte(tg.banner()+"\n"), from)
				}
			}()
			return nil
		}
		ln, err := net.Listen("tcp", tg.addr)
		if err != nil {
			return err
		}
		closer = ln.Close
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(tg.banner() + "\n"))
				_ = c.Close()
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatalf("serve %s %s in %s: %v", tg.proto, tg.addr, tg.ns, err)
	}
	t.Cleanup(func() { _ = closer() })
}

// outcome is what one probe saw.
type outcome struct {
	target
	answer  string // the banner received
	err     error
	timeout bool // no answer at all within probeTimeout: dropped
	took    time.Duration
}

func (o outcome) reached() bool { return o.err == nil && o.answer == o.banner() }

func (o outcome) String() string {
	switch {
	case o.reached():
		return "reached (" + o.took.Round(time.Millisecond).String() + ")"
	case o.timeout:
		return "no answer in " + probeTimeout.String() + " (dropped)"
	case o.err != nil:
		return "error: " + o.err.Error()
	}
	return "wrong answer " + o.answer
}

// probe sends one real connection (tcp) or datagram (udp) from netns src
// to tg and waits for its banner.
func probe(src string, tg target) outcome {
	o := outcome{target: tg}
	start := time.Now()
	o.err = inNetns(src, func() error {
		c, err := (&net.Dialer{Timeout: probeTimeout}).Dial(tg.proto, tg.addr)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(start.Add(probeTimeout))
		if tg.proto == "udp" {
			if _, err := c.Write([]byte("probe\n")); err != nil {
				return err
			}
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		o.answer = strings.TrimSuffix(line, "\n")
		return err
	})
	o.took = time.Since(start)
	var ne net.Error
	o.timeout = errors.As(o.err, &ne) && ne.Timeout()
	return o
}

// probeAll probes every target from src at once and logs each outcome.
func probeAll(t *testing.T, phase, src string, targets []target) []outcome {
	t.Helper()
	out := make([]outcome, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = probe(src, tg)
		}()
	}
	wg.Wait()
	for _, o := range out {
		t.Logf("%-14s %s %-21s %-22s %s", phase, o.proto, o.addr, o.what, o)
	}
	return out
}
