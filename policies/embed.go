package policies

import (
	"embed"
	"io/fs"
)

// bundleFiles is the bundle as shipped: manifest, data and every Rego file,
// tests included (Reload and `sandgate policy test` run them).
//
//go:embed .manifest data.json lib/*.rego authz/*.rego admission/*.rego lifecycle/*.rego hosts/*.rego reclaim/*.rego isolation/*.rego
var bundleFiles embed.FS

// EmbeddedBundle returns the bundle compiled into this binary, tests included.
func EmbeddedBundle() fs.FS { return bundleFiles }
