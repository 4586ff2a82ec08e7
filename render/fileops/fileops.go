// Package fileops renders the command line the gateway runs inside a
// sandbox for every file operation (PUT, GET and DELETE of
// /v1/sandboxes/{id}/files, policy rules F1 and F2), and reads back what
// it prints.
//
// Files travel over Nomad alloc exec inside the container, like any exec:
// no host path is ever mounted and no shell runs on the host. The gateway
// sends /bin/sh -c Script with the operation's values as positional
// parameters; nothing the caller sends is interpolated into the script.
//
// The policy has already decided on the normalised path (absolute, no ".."
// segment, at or under one of files.roots). The script adds what only the
// container can know: it resolves every symbolic link on the way and
// refuses, with ExitEscapes, a path whose real location leaves the roots it
// is given (the policy's files.roots), so a link in /workspace pointing at
// /etc reads, writes or deletes nothing outside /workspace. It then:
//
//   - put: creates the missing parent directories, writes stdin to a
//     temporary name beside the target (.sandgate-put.PID), checks that
//     exactly SIZE bytes arrived (a caller that went away mid-body leaves
//     nothing behind), sets MODE and renames the file over the target
//     (atomic: a reader sees the old file or the new one, never part of
//     it); it prints "SIZE MODE MTIME" of the result;
//   - get of a regular file: prints a header line "F SIZE MODE MTIME
//     OFFSET LENGTH" and then LENGTH bytes from OFFSET: the whole file, or
//     the window a caller asked for (OFFSET, and at most LENGTH bytes;
//     LENGTH -1 is to the end). A window of more than MAX bytes is refused
//     with ExitTooLarge before anything is printed; a FIFO, device or
//     socket with ExitNotRegular (reading one could block forever);
//   - get of a directory: prints "D TOTAL LISTED", then LISTED lines
//     "SIZE MODE MTIME TYPE" from stat (symbolic links are not followed),
//     then LISTED name lines: "n" and the name, or "x" and its bytes in hex
//     when the name holds a newline or a backslash; at most MAXENTRIES
//     entries, in the shell's glob order;
//   - delete: removes a file or a symbolic link (never its target), an
//     empty directory, or, with RECURSIVE 1, a directory and what it holds.
//
// It needs a POSIX sh at /bin/sh and cat, mkdir, mv, chmod, rm, rmdir,
// stat, readlink -f, wc, od and tr, which busybox and GNU coreutils images
// have. A process inside the sandbox could swap a directory for a link
// between the check and the write; it can only reach its own container's
// filesystem that way, which it can already change (docs/threat-model.md).
package fileops

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sandgate/internal/clip"
)

// Name is $0 of the script: what its own error messages start with.
const Name = "sandgate-files"

// Shell is the interpreter, by absolute path.
const Shell = "/bin/sh"

// The script's exit statuses besides 0; stderr holds a message naming the
// path.
const (
	ExitNotFound    = 10 // the path, or a directory on the way, does not exist
	ExitEscapes     = 11 // a link on the way resolves outside the roots, or does not resolve
	ExitIsDirectory = 12 // put onto a directory
	ExitNotDir      = 13 // a component on the way is not a directory
	ExitNotRegular  = 14 // get of a FIFO, device or socket
	ExitTooLarge    = 15 // get of a file larger than MAX
	ExitNotEmpty    = 16 // delete of a non-empty directory without RECURSIVE
	ExitShort       = 17 // put received other than SIZE bytes; nothing was written
	ExitWriteFailed = 18 // the filesystem refused (read-only, full, permissions)
)

// Op is one file operation.
type Op string

// The operations: write a file, read a file or list a directory, remove.
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpDelete Op = "delete"
)

// Script is run as `/bin/sh -c Script sandgate-files OP PATH MODE SIZE MAX
// MAXENTRIES RECURSIVE TIMEOUT OFFSET LENGTH ROOT...` (MODE octal; SIZE,
// MAX, MAXENTRIES, TIMEOUT in seconds, OFFSET and LENGTH decimal, LENGTH -1
// for the rest of the file; RECURSIVE 0 or 1; each ROOT without its
// trailing slash, "" for /).
const Script = `op=$1 p=$2 mode=$3 size=$4 max=$5 maxn=$6 rec=$7 tmo=$8 off=$9 len=${10}
shift 10
under() { u=$1; shift; for r; do case "$u/" in "$r"/*) return 0;; esac; done; return 1; }
fail() { printf '%s: %s\n' "$p" "$2" >&2; exit "$1"; }
d=${p%/*} b=${p##*/}
[ -n "$d" ] || d=/
a=$d rest=
while [ ! -d "$a" ]; do
	[ -L "$a" ] && fail 11 "$a is a symbolic link that does not resolve"
	[ -e "$a" ] && fail 13 "$a is not a directory"
	[ "$op" = put ] || fail 10 "no such file or directory"
	rest=/${a##*/}$rest a=${a%/*}
	[ -n "$a" ] || a=/
done
ra=$(cd -P "$a" 2>/dev/null && pwd -P) || fail 10 "$a cannot be entered"
[ "$ra" = / ] && ra=
[ "$op" = get ] || under "$ra$rest" "$@" || fail 11 "$d resolves to $ra$rest, outside the allowed roots"
t=$ra$rest/$b
case $op in
put)
	if [ -L "$t" ]; then
		rt=$(readlink -f "$t" 2>/dev/null) || fail 11 "a symbolic link that does not resolve"
		under "$rt" "$@" || fail 11 "resolves to $rt, outside the allowed roots"
		t=$rt
	fi
	[ -d "$t" ] && fail 12 "is a directory"
	[ -z "$rest" ] || mkdir -p "$ra$rest" 2>/dev/null || fail 18 "cannot create its directory"
	tmp=${t%/*}/.sandgate-put.$$
	to=
	if [ "$tmo" -gt 0 ] && command -v timeout >/dev/null 2>&1; then to="timeout $tmo"; fi
	if ! $to cat >"$tmp" 2>/dev/null; then rm -f "$tmp"; fail 18 "cannot be written (read-only or full filesystem, or no permission), or its bytes did not arrive within $tmo s"; fi
	got=$(wc -c <"$tmp")
	if [ "$((got))" -ne "$size" ]; then rm -f "$tmp"; fail 17 "received $((got)) of $size bytes; nothing was written"; fi
	if ! { chmod "$mode" "$tmp" && mv -f "$tmp" "$t"; } 2>/dev/null; then rm -f "$tmp"; fail 18 "cannot be replaced"; fi
	stat -c '%s %a %Y' "$t";;
get)
	if [ ! -e "$t" ]; then [ -L "$t" ] && fail 11 "a symbolic link that does not resolve"; fail 10 "no such file or directory"; fi
	rt=$(readlink -f "$t" 2>/dev/null) || fail 11 "a symbolic link that does not resolve"
	under "$rt" "$@" || fail 11 "resolves to $rt, outside the allowed roots"
	if [ -d "$rt" ]; then
		cd "$rt" || fail 10 "cannot be entered"
		set -- * .[!.]* ..?*
		n=0 i=0
		for f; do
			shift
			if [ -e "$f" ] || [ -L "$f" ]; then
				n=$((n+1))
				if [ "$i" -lt "$maxn" ]; then set -- "$@" "./$f"; i=$((i+1)); fi
			fi
		done
		printf 'D %s %s\n' "$n" "$i"
		[ "$i" -eq 0 ] || stat -c '%s %a %Y %F' "$@" || exit 18
		nl='
'
		for f; do
			f=${f#./}
			case $f in
			*"$nl"*|*\\*) printf x; printf '%s' "$f" | od -An -v -tx1 | tr -d ' \n'; echo;;
			*) printf 'n%s\n' "$f";;
			esac
		done
	elif [ -f "$rt" ]; then
		set -- $(stat -c '%s %a %Y' "$rt") || exit 18
		n=$(($1 > off ? $1 - off : 0))
		if [ "$len" -ge 0 ] && [ "$len" -lt "$n" ]; then n=$len; fi
		if [ "$n" -gt "$max" ]; then
			[ "$n" -eq "$1" ] && fail 15 "is $1 bytes, more than the $max a read returns"
			fail 15 "is $1 bytes: the $n asked for from $off are more than the $max a read returns"
		fi
		printf 'F %s %s %s %s %s\n' "$1" "$2" "$3" "$off" "$n"
		[ "$off" -eq 0 ] && [ "$n" -eq "$1" ] && exec cat "$rt"
		[ "$n" -eq 0 ] && exit 0
		tail -c +$((off+1)) "$rt" | head -c "$n"
	else
		fail 14 "is not a regular file or a directory"
	fi;;
delete)
	[ -e "$t" ] || [ -L "$t" ] || fail 10 "no such file or directory"
	if [ -L "$t" ] || [ ! -d "$t" ]; then
		rm -f "$t" 2>/dev/null || fail 18 "cannot be removed"
	elif [ "$rec" = 1 ]; then
		rm -rf "$t" 2>/dev/null || fail 18 "cannot be removed"
	else
		rmdir "$t" 2>/dev/null || fail 16 "is a directory that is not empty (recursive=true removes it and what it holds)"
	fi;;
*) exit 2;;
esac
`

// Request is one operation as the gateway sends it.
type Request struct {
	Op   Op
	Path string // normalised, absolute (the policy judged it)
	// Mode is the permission bits a put sets.
	Mode uint32
	// Size is the number of bytes a put sends on stdin.
	Size int64
	// MaxBytes is the largest file a get returns.
	MaxBytes int64
	// MaxEntries bounds a directory listing.
	MaxEntries int
	// Recursive lets a delete remove a non-empty directory.
	Recursive bool
	// Timeout bounds how long a put waits for its bytes inside the
	// sandbox (whole seconds; 0: unbounded), with timeout(1) where the
	// image has it: a put whose gateway went away without closing its
	// stdin ends then, leaving nothing.
	Timeout time.Duration
	// Offset and Length are the window a get returns of a regular file:
	// from Offset, at most Length bytes (0: to the end).
	Offset, Length int64
	// Roots are the allowed roots (policy data files.roots).
	Roots []string
}

// Args returns the argv the gateway sends to Nomad.
func (r Request) Args() []string {
	rec := "0"
	if r.Recursive {
		rec = "1"
	}
	out := make([]string, 0, 14+len(r.Roots))
	out = append(out, Shell, "-c", Script, Name, string(r.Op), r.Path,
		strconv.FormatUint(uint64(r.Mode), 8), strconv.FormatInt(r.Size, 10),
		strconv.FormatInt(r.MaxBytes, 10), strconv.Itoa(r.MaxEntries), rec,
		strconv.FormatInt(int64(r.Timeout/time.Second), 10),
		strconv.FormatInt(max(r.Offset, 0), 10), strconv.FormatInt(r.window(), 10))
	for _, root := range r.Roots {
		out = append(out, strings.TrimSuffix(root, "/"))
	}
	return out
}

// window is Length as Args sends it: -1, to the end, for no bound.
func (r Request) window() int64 {
	if r.Length <= 0 {
		return -1
	}
	return r.Length
}

// Parse reads back a Request from Args' output; ok is false for any other
// argv. The Nomad simulator uses it to emulate the script.
func Parse(argv []string) (Request, bool, error) {
	if len(argv) < 14 || argv[0] != Shell || argv[1] != "-c" || argv[2] != Script || argv[3] != Name {
		return Request{}, false, nil
	}
	r := Request{Op: Op(argv[4]), Path: argv[5], Recursive: argv[10] == "1", Roots: argv[14:]}
	var err error
	if r.Offset, err = strconv.ParseInt(argv[12], 10, 64); err != nil || r.Offset < 0 {
		return Request{}, true, fmt.Errorf("fileops: offset %q", argv[12])
	}
	if r.Length, err = strconv.ParseInt(argv[13], 10, 64); err != nil || r.Length < -1 || r.Length == 0 {
		return Request{}, true, fmt.Errorf("fileops: length %q", argv[13])
	}
	r.Length = max(r.Length, 0)
	tmo, err := strconv.ParseInt(argv[11], 10, 64)
	if err != nil || tmo < 0 {
		return Request{}, true, fmt.Errorf("fileops: timeout %q", argv[11])
	}
	r.Timeout = time.Duration(tmo) * time.Second
	mode, err := strconv.ParseUint(argv[6], 8, 32)
	if err != nil {
		return Request{}, true, fmt.Errorf("fileops: mode %q: %w", argv[6], err)
	}
	r.Mode = uint32(mode)
	if r.Size, err = strconv.ParseInt(argv[7], 10, 64); err != nil {
		return Request{}, true, fmt.Errorf("fileops: size %q: %w", argv[7], err)
	}
	if r.MaxBytes, err = strconv.ParseInt(argv[8], 10, 64); err != nil {
		return Request{}, true, fmt.Errorf("fileops: max %q: %w", argv[8], err)
	}
	if r.MaxEntries, err = strconv.Atoi(argv[9]); err != nil {
		return Request{}, true, fmt.Errorf("fileops: max entries %q: %w", argv[9], err)
	}
	switch r.Op {
	case OpPut, OpGet, OpDelete:
	default:
		return Request{}, true, fmt.Errorf("fileops: unknown operation %q", r.Op)
	}
	return r, true, nil
}

// Stat is what the script reports of a file.
type Stat struct {
	Size    int64
	Mode    uint32 // permission bits
	ModTime time.Time
}

// ParseStat reads "SIZE MODE MTIME" (stat -c '%s %a %Y').
func ParseStat(line string) (Stat, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return Stat{}, fmt.Errorf("fileops: stat line %q is not SIZE MODE MTIME", clip.String(line, 64))
	}
	return statFields(f[0], f[1], f[2])
}

func statFields(size, mode, mtime string) (Stat, error) {
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 {
		return Stat{}, fmt.Errorf("fileops: size %q", clip.String(size, 64))
	}
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return Stat{}, fmt.Errorf("fileops: mode %q", clip.String(mode, 64))
	}
	t, err := strconv.ParseInt(mtime, 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("fileops: mtime %q", clip.String(mtime, 64))
	}
	return Stat{Size: n, Mode: uint32(m), ModTime: time.Unix(t, 0).UTC()}, nil
}

// Header is the first line a get prints.
type Header struct {
	Dir bool
	// File: the regular file's size, mode and modification time, and the
	// window that follows: Length bytes from Offset.
	File           Stat
	Offset, Length int64
	// Dir: how many entries the directory holds and how many are listed.
	Total, Listed int
}

// MaxHeaderLine bounds the header line the gateway waits for.
const MaxHeaderLine = 128

// ParseHeader reads a get's first line (without its newline).
func ParseHeader(line string) (Header, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 6 && f[0] == "F":
		st, err := statFields(f[1], f[2], f[3])
		if err != nil {
			return Header{}, err
		}
		off, err1 := strconv.ParseInt(f[4], 10, 64)
		n, err2 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil || off < 0 || n < 0 || n > max(st.Size-off, 0) {
			return Header{}, fmt.Errorf("fileops: file header %q: the window is not within the file", clip.String(line, 64))
		}
		return Header{File: st, Offset: off, Length: n}, nil
	case len(f) == 3 && f[0] == "D":
		total, err1 := strconv.Atoi(f[1])
		listed, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || total < 0 || listed < 0 || listed > total {
			return Header{}, fmt.Errorf("fileops: listing header %q", clip.String(line, 64))
		}
		return Header{Dir: true, Total: total, Listed: listed}, nil
	}
	return Header{}, fmt.Errorf("fileops: header %q is neither F nor D", clip.String(line, 64))
}

// Entry is one directory entry of a listing.
type Entry struct {
	Name string
	// Type is file, dir, symlink or other (FIFO, socket, device).
	Type string
	Stat
}

// ParseListing reads the lines a directory get prints after its header:
// listed stat lines, then listed name lines.
func ParseListing(body []byte, listed int) ([]Entry, error) {
	lines := bytes.Split(body, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != 2*listed {
		return nil, fmt.Errorf("fileops: listing of %d entries has %d lines", listed, len(lines))
	}
	out := make([]Entry, listed)
	for i := range listed {
		f := strings.SplitN(string(lines[i]), " ", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("fileops: listing line %q", clip.String(string(lines[i]), 64))
		}
		st, err := statFields(f[0], f[1], f[2])
		if err != nil {
			return nil, err
		}
		name, err := entryName(lines[listed+i])
		if err != nil {
			return nil, err
		}
		out[i] = Entry{Name: name, Type: entryType(f[3]), Stat: st}
	}
	return out, nil
}

func entryName(line []byte) (string, error) {
	if len(line) < 2 {
		return "", fmt.Errorf("fileops: name line %q", clip.String(string(line), 64))
	}
	switch line[0] {
	case 'n':
		return string(line[1:]), nil
	case 'x':
		b, err := hex.DecodeString(string(line[1:]))
		if err != nil {
			return "", fmt.Errorf("fileops: hex name %q: %w", clip.String(string(line), 64), err)
		}
		return string(b), nil
	}
	return "", fmt.Errorf("fileops: name line %q", clip.String(string(line), 64))
}

// entryType maps stat's %F (GNU and busybox wording) to a listing's type.
func entryType(f string) string {
	switch {
	case f == "directory":
		return "dir"
	case f == "symbolic link":
		return "symlink"
	case strings.HasPrefix(f, "regular"):
		return "file"
	}
	return "other"
}

// FormatEntry writes one entry as the script does: the stat line and the
// name line (the simulator's side of ParseListing).
func FormatEntry(e Entry) (statLine, nameLine string) {
	kind := map[string]string{"dir": "directory", "symlink": "symbolic link", "file": "regular file"}[e.Type]
	if kind == "" {
		kind = "fifo"
	}
	statLine = fmt.Sprintf("%d %o %d %s", e.Size, e.Mode, e.ModTime.Unix(), kind)
	if strings.ContainsAny(e.Name, "\n\\") {
		return statLine, "x" + hex.EncodeToString([]byte(e.Name))
	}
	return statLine, "n" + e.Name
}
