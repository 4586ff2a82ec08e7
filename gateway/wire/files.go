package wire

import (
	"fmt"
	"io/fs"
	"strconv"
)

// Entry types of a FileInfo.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeOther   = "other" // a FIFO, socket or device
)

// FileInfo is a file as the files API reports it: a write's answer, or
// one entry of a Listing.
type FileInfo struct {
	// Path is the file's absolute path as the gateway normalised it; empty
	// in a listing's entries.
	Path string `json:"path,omitempty"`
	// Name is a listing entry's name; empty otherwise.
	Name string `json:"name,omitempty"`
	// Type is one of the FileType constants.
	Type string `json:"type"`
	// Size is in bytes; a symbolic link's is the length of its target.
	Size int64 `json:"size"`
	// Mode is the permission bits in octal, e.g. "0644".
	Mode string `json:"mode"`
	// ModifiedAt is the modification time, RFC 3339 UTC.
	ModifiedAt string `json:"modified_at"`
}

// Perm is Mode as permission bits.
func (f FileInfo) Perm() (fs.FileMode, error) {
	n, err := strconv.ParseUint(f.Mode, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("wire: file mode %q is not octal", f.Mode)
	}
	return fs.FileMode(n) & fs.ModePerm, nil
}

// Listing is a directory's GET /v1/sandboxes/{id}/files.
type Listing struct {
	Path string `json:"path"`
	// Entries are at most files.max_list_entries, in the sandbox shell's
	// glob order; each has Name, and no Path.
	Entries []FileInfo `json:"entries"`
	// Truncated: the directory holds more entries (Total) than the
	// listing does.
	Truncated bool `json:"truncated"`
	Total     int  `json:"total"`
}
