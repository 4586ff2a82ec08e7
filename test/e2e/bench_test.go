package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/apitest"
	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/render/execwrap"
	"sandgate/render/fileops"
)

// BenchmarkCreateToFirstExec measures, on the real agent, the time from a
// create request to the first successful exec in the new sandbox (a cold
// start: a new container; the image is local), over 10 sandboxes created
// one after the other. It reports p50 and max; each iteration is one round
// of 10. docs/benchmarks.md has the figures and the command:
//
//	go test -run '^$' -bench 'CreateToFirstExec|ExecEchoHi' -benchtime 1x ./test/e2e/
func BenchmarkCreateToFirstExec(b *testing.B) {
	g := startGateway(b, gwOptions{})
	var all []time.Duration
	for b.Loop() {
		for range 10 {
			start := time.Now()
			sb := g.create(b, g.operator, map[string]any{"image": imageDebian, "cpu_mhz": 500})
			for {
				r := g.api(b).Do(http.MethodPost, "/v1/sandboxes/"+sb.ID+"/exec", sb.Token, map[string]any{"argv": []string{"echo", "hi"}})
				if r.Status == http.StatusOK && r.JSON(b)["stdout"] == "hi\n" {
					break
				}
				if time.Since(start) > time.Minute {
					b.Fatalf("no successful exec within a minute: %s", r)
				}
			}
			all = append(all, time.Since(start))
			if r := g.api(b).Do(http.MethodDelete, "/v1/sandboxes/"+sb.ID, g.operator, nil); r.Status != http.StatusNoContent {
				b.Fatalf("destroy: %s", r)
			}
		}
	}
	slices.Sort(all)
	b.ReportMetric(all[len(all)/2].Seconds(), "p50-s")
	b.ReportMetric(all[len(all)-1].Seconds(), "max-s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkExecEchoHi compares `echo hi` through the gateway (token,
// policy, decision log, the exec wrapper, Nomad) with the same exec sent
// straight to Nomad with the project's client, in the same sandbox,
// alternating, 30 of each per iteration: plain argv (ratio), and under the
// same wrapper argv the gateway sends (ratio-same-argv: the gateway's own
// cost without the wrapper's processes).
func BenchmarkExecEchoHi(b *testing.B) {
	g, sb, nc, allocID := echoHiSandbox(b)
	wrapped := execwrap.Command{Argv: []string{"echo", "hi"}, Timeout: time.Minute, KillAfter: 5 * time.Second}.Args()
	var viaGateway, direct, directWrapped []time.Duration
	var mu sync.Mutex
	for b.Loop() {
		for range 30 {
			start := time.Now()
			res := g.exec(b, sb.ID, sb.Token, map[string]any{"argv": []string{"echo", "hi"}})
			d := time.Since(start)
			if res.code() != 0 || res.Stdout != "hi\n" {
				b.Fatalf("gateway exec: %+v", res)
			}
			start = time.Now()
			out := &capture{}
			code, err := nc.Exec(b.Context(), allocID, "sandbox", []string{"echo", "hi"}, nil, out, nil)
			dd := time.Since(start)
			if err != nil || code != 0 || out.String() != "hi\n" {
				b.Fatalf("direct exec: %d %v %q", code, err, out.String())
			}
			start = time.Now()
			out = &capture{}
			code, err = nc.Exec(b.Context(), allocID, "sandbox", wrapped, nil, out, nil)
			dw := time.Since(start)
			if err != nil || code != 0 || out.String() != "hi\n" {
				b.Fatalf("direct exec under the wrapper: %d %v %q", code, err, out.String())
			}
			mu.Lock()
			viaGateway, direct, directWrapped = append(viaGateway, d), append(direct, dd), append(directWrapped, dw)
			mu.Unlock()
		}
	}
	mg, md, mw := median(viaGateway), median(direct), median(directWrapped)
	b.ReportMetric(float64(mg.Microseconds())/1000, "gateway-ms")
	b.ReportMetric(float64(md.Microseconds())/1000, "direct-ms")
	b.ReportMetric(float64(mw.Microseconds())/1000, "direct-wrapped-ms")
	b.ReportMetric(float64(mg)/float64(md), "ratio")
	b.ReportMetric(float64(mg)/float64(mw), "ratio-same-argv")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkExecEchoHiStreamed is BenchmarkExecEchoHi for the streamed
// exec (Accept: text/event-stream), timed from the request to the exit
// event: through the gateway as SSE, through the gateway as JSON, and
// straight to Nomad with the project's client, plain and under the same
// wrapper argv the gateway sends for a stream (its SANDGATE_EXEC_ID
// included), alternating in the same sandbox, 30 of each per iteration.
// It reports medians and ratios: sse over direct plain (ratio), over
// direct under the same argv (ratio-same-argv) and over the JSON exec
// (ratio-sse-json).
func BenchmarkExecEchoHiStreamed(b *testing.B) {
	g, sb, nc, allocID := echoHiSandbox(b)
	wrapped := execwrap.Command{
		Argv: []string{"echo", "hi"}, Env: map[string]string{execwrap.ExecIDEnv: "0123456789abcdef01234567"},
		Timeout: time.Minute, KillAfter: 5 * time.Second,
	}.Args()
	req := map[string]any{"argv": []string{"echo", "hi"}, "timeout_seconds": 60}
	var sse, viaJSON, direct, directWrapped []time.Duration
	for b.Loop() {
		for range 30 {
			start := time.Now()
			events, _ := g.streamExec(b.Context(), b, sb, req, nil)
			if err := echoedHi(events); err != nil {
				b.Fatalf("gateway streamed exec: %v: %v", err, events)
			}
			sse = append(sse, events[len(events)-1].at.Sub(start))

			start = time.Now()
			res := g.exec(b, sb.ID, sb.Token, req)
			viaJSON = append(viaJSON, time.Since(start))
			if res.code() != 0 || res.Stdout != "hi\n" {
				b.Fatalf("gateway exec: %+v", res)
			}

			for _, form := range []struct {
				argv []string
				into *[]time.Duration
			}{{[]string{"echo", "hi"}, &direct}, {wrapped, &directWrapped}} {
				start = time.Now()
				out := &capture{}
				code, err := nc.Exec(b.Context(), allocID, "sandbox", form.argv, nil, out, nil)
				*form.into = append(*form.into, time.Since(start))
				if err != nil || code != 0 || out.String() != "hi\n" {
					b.Fatalf("direct exec %q: %d %v %q", form.argv[0], code, err, out.String())
				}
			}
		}
	}
	ms, mj, md, mw := median(sse), median(viaJSON), median(direct), median(directWrapped)
	b.ReportMetric(float64(ms.Microseconds())/1000, "gateway-sse-ms")
	b.ReportMetric(float64(mj.Microseconds())/1000, "gateway-json-ms")
	b.ReportMetric(float64(md.Microseconds())/1000, "direct-ms")
	b.ReportMetric(float64(mw.Microseconds())/1000, "direct-wrapped-ms")
	b.ReportMetric(float64(ms)/float64(md), "ratio")
	b.ReportMetric(float64(ms)/float64(mw), "ratio-same-argv")
	b.ReportMetric(float64(ms)/float64(mj), "ratio-sse-json")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkFiles10MiB compares a 10 MiB file PUT and GET through the
// gateway (token, policy, the files handler streaming the body, Nomad
// alloc exec) with the same fileops script sent straight to Nomad with the
// project's client, the same argv the gateway sends (fileops.Request.Args
// with the policy's files settings, from the suite's policy directory), in
// the same sandbox, alternating, 5 of each per iteration. The direct PUT
// streams its stdin through ExecReader as the gateway does with a request
// body; both GETs are read into memory and checked byte for byte. It
// reports MB/s of the medians and the ratios gateway/direct of the
// median times.
func BenchmarkFiles10MiB(b *testing.B) {
	g, sb, nc, allocID := echoHiSandbox(b)
	eng, err := policies.New(b.Context(), policies.Config{Dir: suite.policyDir})
	if err != nil {
		b.Fatal(err)
	}
	st := eng.Settings().Files
	blob := make([]byte, 10<<20)
	if _, err := rand.Read(blob); err != nil {
		b.Fatal(err)
	}
	request := func(op fileops.Op, p string) fileops.Request {
		return fileops.Request{Op: op, Path: p, Mode: 0o600, Size: int64(len(blob)), MaxBytes: st.MaxReadBytes, MaxEntries: st.MaxListEntries, Roots: st.Roots}
	}
	const viaGateway, direct = "/workspace/bench/gateway.bin", "/workspace/bench/direct.bin"
	var gwPut, dPut, gwGet, dGet []time.Duration
	for b.Loop() {
		for range 5 {
			start := time.Now()
			r := g.file(b.Context(), b, http.MethodPut, sb, viaGateway, blob, "mode", "0600")
			gwPut = append(gwPut, time.Since(start))
			if r.Status != http.StatusOK || r.JSON(b)["size"] != float64(len(blob)) {
				b.Fatalf("gateway put: %s", r)
			}

			start = time.Now()
			out, errOut := &capture{}, &capture{}
			code, err := nc.ExecReader(b.Context(), allocID, "sandbox", request(fileops.OpPut, direct).Args(), io.MultiReader(bytes.NewReader(blob)), out, errOut)
			dPut = append(dPut, time.Since(start))
			if stat, perr := fileops.ParseStat(strings.TrimSpace(out.String())); err != nil || code != 0 || perr != nil || stat.Size != int64(len(blob)) {
				b.Fatalf("direct put: %d %v %q %q", code, err, out.String(), errOut.String())
			}

			start = time.Now()
			r = g.file(b.Context(), b, http.MethodGet, sb, viaGateway, nil)
			gwGet = append(gwGet, time.Since(start))
			if r.Status != http.StatusOK || !bytes.Equal(r.Body, blob) {
				b.Fatalf("gateway get: status %d, %d bytes", r.Status, len(r.Body))
			}

			start = time.Now()
			out, errOut = &capture{}, &capture{}
			code, err = nc.Exec(b.Context(), allocID, "sandbox", request(fileops.OpGet, direct).Args(), nil, out, errOut)
			dGet = append(dGet, time.Since(start))
			line, body, _ := bytes.Cut(out.b, []byte("\n"))
			if h, herr := fileops.ParseHeader(string(line)); err != nil || code != 0 || herr != nil || h.File.Size != int64(len(blob)) || !bytes.Equal(body, blob) {
				b.Fatalf("direct get: %d %v %q, %d bytes", code, err, errOut.String(), len(body))
			}
		}
	}
	mgp, mdp, mgg, mdg := median(gwPut), median(dPut), median(gwGet), median(dGet)
	b.ReportMetric(mbps(len(blob), mgp), "gateway-put-MB/s")
	b.ReportMetric(mbps(len(blob), mdp), "direct-put-MB/s")
	b.ReportMetric(mbps(len(blob), mgg), "gateway-get-MB/s")
	b.ReportMetric(mbps(len(blob), mdg), "direct-get-MB/s")
	b.ReportMetric(float64(mgp)/float64(mdp), "put-ratio")
	b.ReportMetric(float64(mgg)/float64(mdg), "get-ratio")
	b.ReportMetric(0, "ns/op")
}

// echoedHi checks a streamed `echo hi`: start, stdout "hi\n", then one
// exit with code 0, last.
func echoedHi(events []sseEvent) error {
	var out strings.Builder
	for i, ev := range events {
		switch {
		case i == 0 && ev.event != "start":
			return errors.New("no start event first")
		case ev.event == "stdout":
			var d struct{ Data, Encoding string }
			if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
				return fmt.Errorf("stdout event %s: %w", ev.data, err)
			}
			if d.Encoding != "utf-8" {
				return fmt.Errorf("stdout event %s: not utf-8", ev.data)
			}
			out.WriteString(d.Data)
		case ev.terminal() && i != len(events)-1:
			return errors.New("events after the terminal event")
		}
	}
	var exit struct {
		ExitCode *int `json:"exit_code"`
	}
	if len(events) == 0 || events[len(events)-1].event != "exit" || json.Unmarshal([]byte(events[len(events)-1].data), &exit) != nil || exit.ExitCode == nil || *exit.ExitCode != 0 {
		return errors.New("the stream did not end with exit code 0")
	}
	if out.String() != "hi\n" {
		return fmt.Errorf("stdout %q", out.String())
	}
	return nil
}

// echoHiSandbox starts a gateway with a sandbox for the echo hi
// benchmarks, and the project's Nomad client in the gateway's namespace
// with the sandbox's allocation id.
func echoHiSandbox(b *testing.B) (*gw, apitest.Created, *nomad.Client, string) {
	b.Helper()
	g := startGateway(b, gwOptions{})
	// The policy's default CPU (500 MHz): with cpu_hard_limit, a smaller
	// share throttles every process the exec starts in 100 ms CFS periods.
	sb := g.create(b, g.operator, map[string]any{"image": imageDebian, "cpu_mhz": 500})
	allocs, _, err := g.nomad.Jobs().Allocations("sandgate-sbx-"+sb.ID, false, nil)
	if err != nil || len(allocs) != 1 {
		b.Fatalf("allocations: %v %d", err, len(allocs))
	}
	cfg := nomad.DefaultConfig()
	cfg.Address, cfg.Namespace, cfg.JobPrefix = suite.server.HTTPAddr, g.namespace, "sandgate-sbx-"
	nc, err := nomad.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return g, sb, nc, allocs[0].ID
}

func median(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }

// capture is an io.Writer keeping what was written.
type capture struct{ b []byte }

func (c *capture) Write(p []byte) (int, error) { c.b = append(c.b, p...); return len(p), nil }
func (c *capture) String() string              { return string(c.b) }
