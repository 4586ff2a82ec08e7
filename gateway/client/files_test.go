package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"sandgate/gateway/client"
	"sandgate/gateway/gatewaytest"
	"sandgate/gateway/token"
)

// liveSandbox is a running sandbox on the in-process gateway (the
// simulator, the embedded bundle), with a client holding its session
// token and one holding the operator's.
func liveSandbox(t *testing.T) (g *gatewaytest.Gateway, id string, session, operator *client.Client) {
	t.Helper()
	g = gatewaytest.New(t, gatewaytest.Options{})
	operator, err := client.New(client.Config{Addr: g.URL, Token: g.Mint(token.RoleOperator, "files-test")})
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := operator.CreateSandbox(context.Background(), client.CreateRequest{})
	if err != nil || sbx.State != client.StateRunning {
		t.Fatalf("create: %+v %v", sbx, err)
	}
	if session, err = client.New(client.Config{Addr: g.URL, Token: sbx.Token}); err != nil {
		t.Fatal(err)
	}
	return g, sbx.ID, session, operator
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// problemOf fails t unless err is a *client.Problem of status, code and
// exactly rules, and returns its fields.
func problemOf(t *testing.T, err error, status int, code string, rules ...string) client.Problem {
	t.Helper()
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != status || p.Code != code || !slices.Equal(p.RuleIDs, rules) {
		t.Fatalf("got %v (%#v), want %d %s %v", err, p, status, code, rules)
	}
	return *p
}

// A file goes in, comes back byte for byte, is listed and removed, with a
// session token on its own sandbox; the limits of the headers are typed.
func TestFilesRoundTripThroughTheClient(t *testing.T) {
	t.Parallel()
	_, id, c, _ := liveSandbox(t)
	ctx := context.Background()
	data := make([]byte, 2<<20+3) // beyond the gateway's 1 MiB JSON body limit
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	mode := fs.FileMode(0o600)
	info, err := c.WriteFile(ctx, id, "/workspace/out/blob.bin", iotest.HalfReader(bytes.NewReader(data)), int64(len(data)), client.WriteOptions{Mode: &mode})
	if err != nil {
		t.Fatal(err)
	}
	want := client.FileLimits{MaxWriteBytes: 64 << 20, MaxReadBytes: 64 << 20, MaxListEntries: 1000, TimeoutSeconds: 300}
	if info.Path != "/workspace/out/blob.bin" || info.Type != client.FileTypeFile || info.Size != int64(len(data)) || info.Mode != "0600" ||
		info.ModifiedAt == "" || info.Limits != want {
		t.Fatalf("written: %+v", info)
	}
	if p, err := info.Perm(); err != nil || p != 0o600 {
		t.Fatalf("perm %v %v", p, err)
	}

	rc, got, err := c.ReadFile(ctx, id, "/workspace/out/blob.bin")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes (equal %v): %v", len(back), bytes.Equal(back, data), err)
	}
	if got.Size != int64(len(data)) || got.Mode != "0600" || got.ModifiedAt != info.ModifiedAt || got.Type != client.FileTypeFile || got.Limits != want {
		t.Fatalf("read info: %+v", got)
	}

	// A window: Size is the whole file's, the reader yields the window.
	rc, got, err = c.ReadFileWindow(ctx, id, "/workspace/out/blob.bin", 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	back, err = io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(back, data[10:30]) || got.Size != int64(len(data)) {
		t.Fatalf("window: %d bytes, %+v, %v", len(back), got, err)
	}
	if _, _, err := c.ReadFileWindow(ctx, id, "/workspace/out/blob.bin", -1, 0); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a negative offset: %v", err)
	}

	// An empty file, at the policy's default mode.
	if info, err = c.WriteFile(ctx, id, "/workspace/empty", nil, 0, client.WriteOptions{}); err != nil || info.Size != 0 || info.Mode != "0644" {
		t.Fatalf("empty write: %+v %v", info, err)
	}
	rc, got, err = c.ReadFile(ctx, id, "/workspace/empty")
	if err != nil || got.Size != 0 {
		t.Fatalf("empty read: %+v %v", got, err)
	}
	if b, _ := io.ReadAll(rc); len(b) != 0 {
		t.Fatalf("empty read gave %q", b)
	}
	_ = rc.Close()

	l, err := c.ListFiles(ctx, id, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "/workspace" || l.Total != 2 || l.Truncated || len(l.Entries) != 2 || l.Limits != want ||
		l.Entries[0].Name != "empty" || l.Entries[0].Type != client.FileTypeFile || l.Entries[1].Name != "out" || l.Entries[1].Type != client.FileTypeDir {
		t.Fatalf("listing: %+v", l)
	}

	// A directory is not read, a file is not listed: the caller is told
	// which call reads it.
	if _, _, err := c.ReadFile(ctx, id, "/workspace/out"); !errors.Is(err, client.ErrIsDirectory) {
		t.Fatalf("read of a directory: %v", err)
	}
	if _, err := c.ListFiles(ctx, id, "/workspace/out/blob.bin"); !errors.Is(err, client.ErrNotDirectory) || !strings.Contains(err.Error(), "2097155 bytes") {
		t.Fatalf("list of a file: %v", err)
	}

	problemOf(t, c.DeleteFile(ctx, id, "/workspace/out", false), 409, client.CodeDirectoryNotEmpty)
	if err := c.DeleteFile(ctx, id, "/workspace/out", true); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ReadFile(ctx, id, "/workspace/out/blob.bin")
	problemOf(t, err, 404, client.CodeFileNotFound)
}

// Refusals are *Problem errors with the rule ids, like every other call's;
// what the client can tell is wrong is refused before any request.
func TestFileRefusalsAreProblemsWithTheirRules(t *testing.T) {
	t.Parallel()
	_, id, c, op := liveSandbox(t)
	ctx := context.Background()
	other, err := op.CreateSandbox(ctx, client.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}

	_, err = c.WriteFile(ctx, id, "/etc/passwd", strings.NewReader("x"), 1, client.WriteOptions{})
	p := problemOf(t, err, 403, client.CodePolicyDenied, "F1")
	if !p.Denied() || p.DecisionID == "" {
		t.Fatalf("F1: %+v", p)
	}
	_, _, err = c.ReadFile(ctx, id, "/workspace/../etc/passwd")
	problemOf(t, err, 403, client.CodePolicyDenied, "F1")
	problemOf(t, c.DeleteFile(ctx, id, "/workspace", true), 403, client.CodePolicyDenied, "F1")
	_, err = c.ListFiles(ctx, other.ID, "/workspace")
	problemOf(t, err, 403, client.CodePolicyDenied, "T2")
	// A size past files.max_write_bytes is refused on its Content-Length,
	// before the gateway reads a byte; the client still gets the answer.
	_, err = c.WriteFile(ctx, id, "/workspace/big", io.LimitReader(zeros{}, 64<<20+1), 64<<20+1, client.WriteOptions{})
	problemOf(t, err, 403, client.CodePolicyDenied, "F2")
	// Onto a directory.
	if _, err := c.WriteFile(ctx, id, "/workspace/d/f", strings.NewReader("x"), 1, client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.WriteFile(ctx, id, "/workspace/d", strings.NewReader("x"), 1, client.WriteOptions{})
	problemOf(t, err, 409, client.CodeIsDirectory)

	// A reader shorter than its size never reaches the file: net/http
	// refuses to send it, and the gateway keeps the old bytes.
	_, err = c.WriteFile(ctx, id, "/workspace/d/f", strings.NewReader("ab"), 5, client.WriteOptions{})
	var te *client.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("short reader: %v", err)
	}
	rc, _, err := c.ReadFile(ctx, id, "/workspace/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(rc); string(b) != "x" {
		t.Fatalf("after a short write the file holds %q", b)
	}
	_ = rc.Close()

	for name, call := range map[string]func() error{
		"an empty path": func() error { return c.DeleteFile(ctx, id, "", false) },
		"an empty id":   func() error { _, err := c.ListFiles(ctx, "", "/workspace"); return err },
		"a negative size": func() error {
			_, err := c.WriteFile(ctx, id, "/workspace/x", nil, -1, client.WriteOptions{})
			return err
		},
		"a mode beyond the permission bits": func() error {
			m := fs.ModeSetuid | 0o755
			_, err := c.WriteFile(ctx, id, "/workspace/x", nil, 0, client.WriteOptions{Mode: &m})
			return err
		},
	} {
		if err := call(); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
