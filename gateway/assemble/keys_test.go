package assemble_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sandgate/gateway/assemble"
	"sandgate/gateway/token"
)

// keyDir is a key directory holding n new keys, the active one named by
// its index; it returns the keys too.
func keyDir(t *testing.T, n, active int) (string, []token.DirKey) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	keys := make([]token.DirKey, n)
	for i := range keys {
		k, err := token.CreateKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	if err := token.Activate(dir, keys[active].KID); err != nil {
		t.Fatal(err)
	}
	return dir, keys
}

func mintWith(t *testing.T, iss *token.Issuer) string {
	t.Helper()
	raw, _, err := iss.Mint(token.MintRequest{Role: token.RoleAgent, Subject: "ci", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestTwoGatewaysOnOneKeyDirVerifyEachOthersTokens(t *testing.T) {
	t.Parallel()
	dir, keys := keyDir(t, 2, 1)
	replica := func() *assemble.Gateway {
		c := config(t, t.TempDir())
		c.KeyDir = dir
		g := open(t, c)
		if _, err := os.Stat(filepath.Join(c.DataDir, assemble.KeyFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a signing.key was written although KeyDir gives the keys: %v", err)
		}
		return g
	}
	r1, r2 := replica(), replica()
	if r1.Issuer.KeyID() != keys[1].KID || r2.Issuer.KeyID() != keys[1].KID {
		t.Fatalf("signing kids %s, %s; want the active %s", r1.Issuer.KeyID(), r2.Issuer.KeyID(), keys[1].KID)
	}
	for _, pair := range [][2]*assemble.Gateway{{r1, r2}, {r2, r1}} {
		if _, err := pair[1].Issuer.Verify(mintWith(t, pair[0].Issuer)); err != nil {
			t.Errorf("a replica refuses the other's token: %v", err)
		}
	}
	// A token of the inactive key (minted before the rotation) verifies.
	old, _, err := assemble.OpenIssuer(func() assemble.Config {
		c := config(t, t.TempDir())
		c.KeyFiles = []string{keys[0].Path}
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Issuer.Verify(mintWith(t, old)); err != nil {
		t.Errorf("a token of the key rotated out: %v", err)
	}
}

func TestKeyFilesSignWithTheActiveKID(t *testing.T) {
	t.Parallel()
	_, keys := keyDir(t, 3, 0)
	paths := []string{keys[0].Path, keys[1].Path, keys[2].Path}
	for _, tc := range []struct {
		name   string
		files  []string
		active string
		want   error // nil: opens and signs with active
	}{
		{"three files, the second active", paths, keys[1].KID, nil},
		{"one file and no active kid", paths[:1], "", nil},
		{"an active kid none of the files has", paths[:2], keys[2].KID, token.ErrKeySet},
		{"several files and no active kid", paths, "", token.ErrKeySet},
		{"one file twice", []string{paths[0], paths[0]}, keys[0].KID, token.ErrKeySet},
		{"a file that is not there", []string{paths[0], paths[0] + ".gone"}, keys[0].KID, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config(t, t.TempDir())
			c.KeyFiles, c.ActiveKID = tc.files, tc.active
			iss, created, err := assemble.OpenIssuer(c)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("OpenIssuer = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil || created {
				t.Fatalf("OpenIssuer: created %v, %v", created, err)
			}
			want := tc.active
			if want == "" {
				want = keys[0].KID
			}
			if iss.KeyID() != want || len(iss.KeyIDs()) != len(tc.files) {
				t.Errorf("signs with %s of %v; want %s of %d", iss.KeyID(), iss.KeyIDs(), want, len(tc.files))
			}
		})
	}
}

func TestAKeyDirIsNeverCreatedAndAStartWithoutItWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) string
		want  error
	}{
		{"a key dir that is not there", func(t *testing.T) string { return filepath.Join(t.TempDir(), "keys") }, fs.ErrNotExist},
		{"a key dir without keys", func(t *testing.T) string { return t.TempDir() }, token.ErrKeySet},
		{"a key dir without an active file", func(t *testing.T) string {
			dir := t.TempDir()
			if _, err := token.CreateKey(dir); err != nil {
				t.Fatal(err)
			}
			return dir
		}, token.ErrKeySet},
		{"a key dir whose active file names a retired key", func(t *testing.T) string {
			dir, keys := keyDir(t, 2, 0)
			if err := os.Remove(keys[0].Path); err != nil {
				t.Fatal(err)
			}
			return dir
		}, token.ErrKeySet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			c := config(t, data)
			c.KeyDir = tc.setup(t)
			g, err := assemble.Open(t.Context(), c)
			if err == nil {
				g.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the data dir was written: %v", err)
			}
			if errors.Is(tc.want, fs.ErrNotExist) {
				if _, err := os.Stat(c.KeyDir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the key dir was created: %v", err)
				}
			}
		})
	}
}

func TestReloadKeysFollowsTheKeyDir(t *testing.T) {
	t.Parallel()
	dir, keys := keyDir(t, 1, 0)
	c := config(t, t.TempDir())
	c.KeyDir = dir
	g := open(t, c)
	tokA := mintWith(t, g.Issuer)

	b, err := token.CreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := token.Activate(dir, b.KID); err != nil {
		t.Fatal(err)
	}
	if ok, err := assemble.ReloadKeys(c, g.Issuer); !ok || err != nil {
		t.Fatalf("ReloadKeys = %v, %v", ok, err)
	}
	if g.Issuer.KeyID() != b.KID {
		t.Fatalf("after the reload the gateway signs with %s, want %s", g.Issuer.KeyID(), b.KID)
	}
	if _, err := g.Issuer.Verify(tokA); err != nil {
		t.Errorf("A's token after B became active: %v", err)
	}

	// A directory that no longer makes a set leaves the old one serving.
	if err := os.Remove(filepath.Join(dir, token.ActiveFile)); err != nil {
		t.Fatal(err)
	}
	if ok, err := assemble.ReloadKeys(c, g.Issuer); ok || !errors.Is(err, token.ErrKeySet) {
		t.Fatalf("ReloadKeys without an active file = %v, %v; want ErrKeySet", ok, err)
	}
	if g.Issuer.KeyID() != b.KID || len(g.Issuer.KeyIDs()) != 2 {
		t.Fatalf("a refused reload changed the set: %s %v", g.Issuer.KeyID(), g.Issuer.KeyIDs())
	}

	// Retired: A's token is refused from the reload on.
	if err := token.Activate(dir, b.KID); err != nil {
		t.Fatal(err)
	}
	if _, err := token.Retire(dir, keys[0].KID); err != nil {
		t.Fatal(err)
	}
	if ok, err := assemble.ReloadKeys(c, g.Issuer); !ok || err != nil {
		t.Fatalf("ReloadKeys = %v, %v", ok, err)
	}
	if _, err := g.Issuer.Verify(tokA); !errors.Is(err, token.ErrInvalid) {
		t.Errorf("A's token after A was retired: %v, want ErrInvalid", err)
	}

	// A single key file, or Token.Key, has nothing to reload.
	single := config(t, t.TempDir())
	iss, _, err := assemble.OpenIssuer(single)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := assemble.ReloadKeys(single, iss); ok || err != nil {
		t.Errorf("ReloadKeys of a key file = %v, %v; want nothing done", ok, err)
	}
}
