// Package pgtest gives tests a real PostgreSQL: Debian's server binaries,
// started as their own user on loopback, in a directory of the test's.
//
// Two ways in. Most tests share the server `make test` starts for the
// whole run (test/pgrun exports its address as SANDGATE_TEST_PG_DSN) and
// take a database of their own from it with Database. A test that must
// stop or restart the database under load starts a private server with
// Start.
//
// Without SANDGATE_TEST_PG_DSN a test skips with one line saying so; with
// SANDGATE_PG=require (set by .ci/run) it fails instead, so CI can never
// pass without having run them.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvDSN names the variable holding the shared test server's DSN; EnvRequire
// set to "require" turns a skip for want of it into a failure.
const (
	EnvDSN     = "SANDGATE_TEST_PG_DSN"
	EnvRequire = "SANDGATE_PG"
)

// Server is a PostgreSQL server this process started: its data directory,
// socket directory and port are its own, and it listens on 127.0.0.1 only.
type Server struct {
	dir  string // holds data/, sock/ and server.log
	bin  string // the directory of initdb, pg_ctl and postgres
	port int
	cred *syscall.Credential // the postgres user's when we are root
}

// BinDir finds the server binaries: pg_config's bindir when pg_config is on
// PATH and names a directory holding pg_ctl, else the newest
// /usr/lib/postgresql/N/bin (Debian's layout).
func BinDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: no PostgreSQL server binaries (apt-get install postgresql)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises a new cluster in a new directory under parent (the
// system's temporary directory when empty) and starts it on a free
// loopback port with trust authentication for loopback and the socket.
// fsync is off: the server's own crash safety is not what sandgate's tests
// test, and a restart through Restart is a clean one.
func Start(ctx context.Context, parent string) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "sandgate-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as its own user.
		if s.cred, err = postgresUser(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if err := s.run(ctx, "initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.asOwner(os.Mkdir(s.sock(), 0o700)); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// DSN is the server's address for the database name (postgres when empty).
func (s *Server) DSN(database string) string {
	if database == "" {
		database = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, database)
}

// Start starts a stopped server, on the port it had (a free one the first
// time), and waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	if s.port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		s.port = p
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off "+
		"-c full_page_writes=off -c max_connections=500 -c shared_buffers=64MB", s.port, s.sock())
	return s.run(ctx, "pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "server.log"),
		"-o", opts, "-w", "-t", "120", "start")
}

// Stop stops the server (fast shutdown: clients are disconnected).
func (s *Server) Stop(ctx context.Context) error {
	return s.run(ctx, "pg_ctl", "-D", s.data(), "-m", "fast", "-w", "-t", "120", "stop")
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	err := s.Stop(context.Background())
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// Log returns the server's log, for a failing test's output.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }
func (s *Server) sock() string { return filepath.Join(s.dir, "sock") }

// asOwner hands a path just made to the server's user.
func (s *Server) asOwner(err error) error {
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(s.sock(), int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	return nil
}

// run runs one of the server's programs as the server's user.
func (s *Server) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, prog), args...) //nolint:gosec // the server's own programs, found by BinDir
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s %s: %w\n%s%s", prog, strings.Join(args, " "), err, out, s.Log())
	}
	return nil
}

// postgresUser is the credential of the postgres user Debian's package
// creates.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs the postgres user (apt-get install postgresql): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: postgres user has ids %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitTimeout bounds one wait of this package on the server.
const waitTimeout = 2 * time.Minute
