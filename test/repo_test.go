package test

import (
	"io/fs"
	"os"
	"testing"
)

// skippedDirs hold no source of the project: git's, and what the build and
// `make run` write.
var skippedDirs = map[string]bool{".git": true, ".build": true, ".sandgate": true, "node_modules": true}

// walkRepo calls visit with the path (relative to the repository root)
// and content of every regular file of the repository that keep accepts,
// reading through an os.Root so nothing outside the repository is opened.
func walkRepo(t *testing.T, keep func(path string, d fs.DirEntry) bool, visit func(path string, src []byte)) {
	t.Helper()
	root, err := os.OpenRoot("..")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	repo := root.FS()
	err = fs.WalkDir(repo, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && skippedDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !keep(path, d) {
			return nil
		}
		src, err := fs.ReadFile(repo, path)
		if err != nil {
			return err
		}
		visit(path, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
