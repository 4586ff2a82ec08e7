package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"sandgate/gateway/client"
)

// remotePath is an ID:/path argument.
type remotePath struct{ id, path string }

func (r remotePath) String() string { return r.id + ":" + r.path }

// parseRemote reads ID:/path: a colon after a non-empty id without a
// slash, then an absolute path. Anything else is local (./a:/b is a local
// name with a colon in it).
func parseRemote(arg string) (remotePath, bool) {
	id, p, ok := strings.Cut(arg, ":")
	if !ok || id == "" || strings.Contains(id, "/") || !strings.HasPrefix(p, "/") {
		return remotePath{}, false
	}
	return remotePath{id: id, path: p}, true
}

// mustRemote is parseRemote for the commands that take only ID:/path.
func mustRemote(arg string) (remotePath, error) {
	r, ok := parseRemote(arg)
	if !ok {
		return r, fmt.Errorf("%q is not ID:/path (a sandbox id, a colon, an absolute path such as %s)", arg, "sbx1:/workspace/out.txt")
	}
	return r, nil
}

func newSandboxCpCmd(a *apiFlags) *cobra.Command {
	var modeFlag string
	cmd := &cobra.Command{
		Use:   "cp [--mode OCTAL] SRC DST",
		Short: "Copy one file into a sandbox or out of it (PUT and GET /v1/sandboxes/{id}/files)",
		Long: `Copy one regular file between this machine and a sandbox, streamed both
ways. The sandbox path is absolute and under the policy's files.roots
(/workspace and /tmp by default, rule F1); the size is at most
files.max_write_bytes to upload (F2) and files.max_read_bytes to download
(64 MiB each by default).

Upload: sandbox cp LOCAL ID:/workspace/PATH. The file is written
atomically and its parent directories are created. Its mode is --mode
(octal), else the local file's permission bits. A PATH ending in / (or an
existing directory) receives the file under its local name. - reads
stdin (spooled to a temporary file first: a write states its size).

Download: sandbox cp ID:/workspace/PATH LOCAL. The bytes go to a temporary
file beside LOCAL, renamed over it once all have arrived: LOCAL is never
left half written. An existing LOCAL keeps its mode; a new one gets the
sandbox file's, less group and other write. LOCAL may be a directory; -
writes the bytes to stdout.

A directory is not copied (no recursive copy): tar it in the sandbox with
exec and copy the archive. -o json prints the file's information.`,
		Example: `  sandgate sandbox cp ./data.csv sbx1:/workspace/data.csv
  sandgate sandbox cp --mode 0755 ./run.sh sbx1:/workspace/bin/
  sandgate sandbox cp sbx1:/workspace/out.json ./out.json
  sandgate sandbox cp sbx1:/workspace/out.json - | jq .`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, srcRemote := parseRemote(args[0])
			dst, dstRemote := parseRemote(args[1])
			switch {
			case srcRemote == dstRemote:
				return errors.New("give one ID:/path and one local path (cp LOCAL ID:/path uploads, cp ID:/path LOCAL downloads)")
			case srcRemote && modeFlag != "":
				return errors.New("--mode applies to an upload only (a download keeps an existing file's mode)")
			}
			var mode *fs.FileMode
			if modeFlag != "" {
				n, err := strconv.ParseUint(modeFlag, 8, 32)
				if err != nil || n > 0o777 {
					return fmt.Errorf("--mode %q: want octal permission bits, at most 0777, such as 0644", modeFlag)
				}
				m := fs.FileMode(n)
				mode = &m
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			if dstRemote {
				return upload(ctx, cmd, a, c, args[0], dst, mode)
			}
			return download(ctx, cmd, a, c, src, args[1])
		},
	}
	cmd.Flags().StringVar(&modeFlag, "mode", "", "an upload's permission bits, octal (default: the local file's, & 0777)")
	return cmd
}

// localSource is an upload's source: a regular file, or stdin spooled to
// one (a write states its size before its bytes).
func localSource(cmd *cobra.Command, name string, dst remotePath) (f *os.File, size int64, perm *fs.FileMode, cleanup func(), err error) {
	if name == "-" {
		tmp, err := os.CreateTemp("", "sandgate-cp-stdin-*")
		if err != nil {
			return nil, 0, nil, nil, fmt.Errorf("spooling stdin: %w", err)
		}
		cleanup = func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }
		n, err := io.Copy(tmp, cmd.InOrStdin())
		if err == nil {
			_, err = tmp.Seek(0, io.SeekStart)
		}
		if err != nil {
			cleanup()
			return nil, 0, nil, nil, fmt.Errorf("spooling stdin: %w", err)
		}
		return tmp, n, nil, cleanup, nil
	}
	f, err = os.Open(name)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	cleanup = func() { _ = f.Close() }
	st, err := f.Stat()
	if err != nil {
		cleanup()
		return nil, 0, nil, nil, err
	}
	switch {
	case st.IsDir():
		cleanup()
		archive := path.Join(path.Dir(path.Clean(dst.path)), "dir.tar")
		return nil, 0, nil, nil, fmt.Errorf("%s is a directory: sandbox cp copies one file (no recursive copy); tar it (tar -cf dir.tar -C %s .), copy dir.tar to %s:%s and unpack it with sandbox exec %s -- sh -c 'mkdir -p %s && tar -xf %s -C %s'",
			name, name, dst.id, archive, dst.id, path.Clean(dst.path), archive, path.Clean(dst.path))
	case !st.Mode().IsRegular():
		cleanup()
		return nil, 0, nil, nil, fmt.Errorf("%s is not a regular file (a write states its size first); pipe it to sandbox cp - ID:/path", name)
	}
	p := st.Mode().Perm()
	return f, st.Size(), &p, cleanup, nil
}

func upload(ctx context.Context, cmd *cobra.Command, a *apiFlags, c *client.Client, local string, dst remotePath, mode *fs.FileMode) error {
	f, size, perm, cleanup, err := localSource(cmd, local, dst)
	if err != nil {
		return err
	}
	defer cleanup()
	if mode == nil {
		mode = perm
	}
	if strings.HasSuffix(dst.path, "/") {
		if local == "-" {
			return fmt.Errorf("%s ends in /: name the file stdin goes to", dst)
		}
		dst.path += filepath.Base(local)
	}
	info, err := c.WriteFile(ctx, dst.id, dst.path, f, size, client.WriteOptions{Mode: mode})
	var p *client.Problem
	if errors.As(err, &p) && p.Code == client.CodeIsDirectory && local != "-" {
		// An existing directory receives the file under its local name.
		if _, serr := f.Seek(0, io.SeekStart); serr != nil {
			return serr
		}
		dst.path = path.Join(dst.path, filepath.Base(local))
		info, err = c.WriteFile(ctx, dst.id, dst.path, f, size, client.WriteOptions{Mode: mode})
	}
	if err != nil {
		if errors.As(err, &p) && p.Denied() && slices.Contains(p.RuleIDs, "F1") && path.Dir(path.Clean(dst.path)) == "/" {
			// likely a root itself: /workspace, /tmp
			return &exitCodeError{code: exitDenied, err: fmt.Errorf("%w\nhint: a root of files.roots (/workspace, /tmp by default) is never replaced; to copy into it, end the path with / (%s/)", &problemError{p: p}, dst)}
		}
		return apiError(a, err)
	}
	if a.json() {
		return printJSON(cmd.OutOrStdout(), info)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "copied %d bytes to %s:%s (mode %s)\n", info.Size, dst.id, info.Path, info.Mode)
	return nil
}

func download(ctx context.Context, cmd *cobra.Command, a *apiFlags, c *client.Client, src remotePath, local string) error {
	rc, info, err := c.ReadFile(ctx, src.id, src.path)
	if errors.Is(err, client.ErrIsDirectory) {
		return fmt.Errorf("%s is a directory: sandbox cp copies one file (no recursive copy); sandbox ls %s lists it, or tar it with sandbox exec %s -- tar -cf /tmp/dir.tar -C %s . and copy /tmp/dir.tar", src, src, src.id, src.path)
	}
	if err != nil {
		return apiError(a, err)
	}
	defer func() { _ = rc.Close() }()
	if local == "-" {
		n, err := io.Copy(cmd.OutOrStdout(), rc)
		if err != nil {
			return fmt.Errorf("%s: %d of %d bytes arrived: %w", src, n, info.Size, err)
		}
		return nil
	}
	if st, err := os.Stat(local); (err == nil && st.IsDir()) || strings.HasSuffix(local, string(os.PathSeparator)) {
		local = filepath.Join(local, path.Base(src.path))
	}
	if err := writeLocal(local, rc, info); err != nil {
		return fmt.Errorf("%s -> %s: %w", src, local, err)
	}
	if a.json() {
		return printJSON(cmd.OutOrStdout(), info)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "copied %d bytes from %s to %s\n", info.Size, src, local)
	return nil
}

// writeLocal writes r to a temporary file beside name and renames it over
// name once exactly info.Size bytes have arrived; on any failure name is
// as it was. An existing name keeps its mode.
func writeLocal(name string, r io.Reader, info client.FileInfo) error {
	perm, err := info.Perm()
	if err != nil {
		perm = 0o644
	}
	perm &^= 0o022
	if st, err := os.Stat(name); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s exists and is not a regular file", name)
		}
		perm = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".sandgate-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, r)
	switch {
	case err != nil:
		return fmt.Errorf("%d of %d bytes arrived: %w", n, info.Size, err)
	case info.Size >= 0 && n != info.Size:
		return fmt.Errorf("%d of %d bytes arrived", n, info.Size)
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	done = true
	return nil
}

func newSandboxLsCmd(a *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "ls ID:/PATH",
		Short: "List a directory in a sandbox (GET /v1/sandboxes/{id}/files)",
		Long: "List a directory under the policy's files.roots: at most files.max_list_entries entries (1000 by\n" +
			"default), and a last line saying how many there are when there are more. -o json prints the listing.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := mustRemote(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.ListFiles(cmd.Context(), r.id, r.path)
			if errors.Is(err, client.ErrNotDirectory) {
				return fmt.Errorf("%s is a file, not a directory: sandbox cp %s - prints it", r, r)
			}
			if err != nil {
				return apiError(a, err)
			}
			w := cmd.OutOrStdout()
			if a.json() {
				return printJSON(w, l)
			}
			t := newTable(w, "NAME", "TYPE", "SIZE", "MODE", "MODIFIED")
			for _, e := range l.Entries {
				t.row(e.Name, e.Type, strconv.FormatInt(e.Size, 10), e.Mode, e.ModifiedAt)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if l.Truncated {
				fmt.Fprintf(w, "%d of %d entries shown (files.max_list_entries)\n", len(l.Entries), l.Total)
			}
			return nil
		},
	}
}

func newSandboxRmCmd(a *apiFlags) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "rm [--recursive] ID:/PATH",
		Short: "Remove a file, a symbolic link or a directory in a sandbox (DELETE /v1/sandboxes/{id}/files)",
		Long: "Remove a file, a symbolic link (never its target) or an empty directory; --recursive removes a\n" +
			"directory and everything in it. The roots themselves (/workspace, /tmp) are never removed (F1).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := mustRemote(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteFile(cmd.Context(), r.id, r.path, recursive); err != nil {
				return apiError(a, err)
			}
			if !a.json() {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove a directory and everything in it")
	return cmd
}
