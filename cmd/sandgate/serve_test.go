package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandgate.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeConfigIsReadStrictly(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "nomad.token")
	if err := os.WriteFile(tokenFile, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `{"listen":"127.0.0.1:8443","data_dir":"/var/lib/sandgate",
	  "nomad":{"address":"https://nomad:4646","token_file":"` + tokenFile + `","timeout":"3s"},
	  "reaper_interval":"10s","reconcile_interval":"1m",
	  "nodes":[{"name":"w1","egress":true,"max_sandboxes":4}]}`
	o, err := loadServeConfig(writeConfig(t, good))
	if err != nil {
		t.Fatal(err)
	}
	if o.Nomad.Token != "s3cr3t" || o.Nomad.Timeout != 3*time.Second || o.ReaperInterval != 10*time.Second ||
		len(o.Nodes) != 1 || o.Nodes[0].Enrollment != "sandbox+egress" || o.Nodes[0].MaxSandboxes != 4 {
		t.Fatalf("parsed %+v", o)
	}
	cases := []struct{ name, body, want string }{
		{"an unknown field", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"lissen":"y"}`, "lissen"},
		{"no listen address", `{"data_dir":"d","nomad":{"address":"http://n"}}`, "listen is required"},
		{"no Nomad address", `{"listen":"x","data_dir":"d"}`, "nomad.address is required"},
		{"a certificate without a key", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"tls":{"cert_file":"c"}}`, "go together"},
		{"a duration that is a number", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"reaper_interval":30}`, "duration"},
		{"a node without a name", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"nodes":[{}]}`, "nodes[].name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadServeConfig(writeConfig(t, c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestTokenMintRecordsAVerifiableToken(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	code, out, stderr := runCLI(t, "", "token", "mint", "--role", "agent", "--subject", "ci", "--ttl", "1h", "--data", data)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw := strings.TrimSpace(out)
	iss, created, err := openIssuer(data, "", "", "")
	if err != nil || created {
		t.Fatalf("the mint did not leave a signing key: created=%v err=%v", created, err)
	}
	claims, err := iss.Verify(raw)
	if err != nil || claims.Subject != "ci" || claims.Role != "agent" {
		t.Fatalf("verify: %+v %v", claims, err)
	}
	st, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetToken(t.Context(), claims.ID)
	if err != nil || rec.Subject != "ci" || rec.Role != "agent" {
		t.Fatalf("token record: %+v %v", rec, err)
	}
	if fi, err := os.Stat(filepath.Join(data, "signing.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key mode: %v %v", fi, err)
	}
	if code, _, _ := runCLI(t, "", "token", "mint", "--role", "session", "--data", data); code != exitError {
		t.Fatalf("a session token was minted offline: exit %d", code)
	}
}
