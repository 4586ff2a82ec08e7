package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sandgate/gateway"
	"sandgate/gateway/token"
	"sandgate/policies"
	"sandgate/store"
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
	  "reaper_interval":"10s","reconcile_interval":"1m","retention":"48h","start_timeout":"90s",
	  "policy":{"evaluate":{"timeout":"3s","max_bytes":65536,"concurrency":4},
	    "replay":{"timeout":"2m","max_bytes":2097152,"concurrency":2,"memory_bytes":536870912,"cpu_time":"30s"}},
	  "http":{"read_header_timeout":"5s","read_timeout":"20s","write_timeout":"40s","idle_timeout":"1m"},
	  "trusted_proxies":["10.0.0.0/8","192.0.2.7","fd00::/8"],
	  "nodes":[{"name":"w1","egress":true,"max_sandboxes":4}]}`
	o, err := loadServeConfig(writeConfig(t, good), serveOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Nomad.Token != "s3cr3t" || o.Nomad.Timeout != 3*time.Second || o.ReaperInterval != 10*time.Second ||
		o.Retention != 48*time.Hour || o.StartTimeout != 90*time.Second ||
		o.HTTP != (httpDeadlines{ReadHeader: 5 * time.Second, Read: 20 * time.Second, Write: 40 * time.Second, Idle: time.Minute}) ||
		len(o.Nodes) != 1 || o.Nodes[0].Enrollment != "sandbox+egress" || o.Nodes[0].MaxSandboxes != 4 {
		t.Fatalf("parsed %+v", o)
	}
	if want := (gateway.PolicyLimits{EvaluateTimeout: 3 * time.Second, EvaluateMaxBytes: 65536, EvaluateConcurrency: 4,
		ReplayTimeout: 2 * time.Minute, ReplayMaxBytes: 2 << 20, ReplayConcurrency: 2, ReplayMemoryBytes: 512 << 20, ReplayCPU: 30 * time.Second}); !reflect.DeepEqual(o.PolicyLimits, want) {
		t.Fatalf("policy limits %+v, want %+v", o.PolicyLimits, want)
	}
	if got := fmt.Sprint(o.TrustedProxies); got != "[10.0.0.0/8 192.0.2.7/32 fd00::/8]" {
		t.Fatalf("trusted_proxies parsed as %s", got)
	}
	cases := []struct{ name, body, want string }{
		{"an unknown field", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"lissen":"y"}`, "lissen"},
		{"no listen address", `{"data_dir":"d","nomad":{"address":"http://n"}}`, "listen is required"},
		{"no Nomad address", `{"listen":"x","data_dir":"d"}`, "nomad.address is required"},
		{"a certificate without a key", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"tls":{"cert_file":"c"}}`, "go together"},
		{"a replay worker with too little memory", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"policy":{"replay":{"memory_bytes":1000}}}`, "policy.replay.memory_bytes 1000 is below 256 MiB"},
		{"no dry run at a time", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"policy":{"evaluate":{"concurrency":-1}}}`, "policy.evaluate.concurrency -1 is below 1"},
		{"a duration that is a number", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"reaper_interval":30}`, "duration"},
		{"a node without a name", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"nodes":[{}]}`, "nodes[].name"},
		{"a policy dir and a bundle file", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"policy":{"dir":"p","bundle_file":"b"}}`, "give one"},
		{"both names of the policy dir", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"policy_dir":"p","policy":{"dir":"q"}}`, "keep policy.dir"},
		{"a negative read timeout", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"http":{"read_timeout":"-1s"}}`, "http.read_timeout must be positive"},
		{"a trusted proxy that is not an address", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"trusted_proxies":["proxy.local"]}`, "trusted_proxies"},
		{"the postgres driver without a DSN", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"store":{"driver":"postgres"}}`, "store.driver postgres needs a DSN: set SANDGATE_STORE_DSN"},
		{"a DSN for the bolt driver", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"store":{"dsn":"postgres://db/s"}}`, `store.dsn is for store.driver postgres, not "bolt"`},
		{"a DSN and a DSN file", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"store":{"driver":"postgres","dsn":"postgres://db/s","dsn_file":"/nonexistent"}}`, "store.dsn and store.dsn_file: give one"},
		{"a negative statement timeout", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"store":{"driver":"postgres","dsn":"postgres://db/s","statement_timeout":"-1s"}}`, "store.max_conns, store.log_conns, store.statement_timeout"},
		{"a verification key without a bundle file", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"policy":{"dir":"p","verification_key":"k"}}`, "verifies a policy.bundle_file"},
		{"a signing key file and a key dir", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"signing_key_file":"k","signing_key_dir":"keys"}`,
			"signing_key_file, signing_key_dir and signing_key_files: give one"},
		{"an active kid for a key dir", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"signing_key_dir":"keys","signing_key_active_kid":"k"}`,
			"signing_key_active_kid picks one of signing_key_files, and none is given"},
		{"several key files and no active kid", `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"signing_key_files":["a.pem","b.pem"]}`,
			"signing_key_active_kid must name the one that signs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadServeConfig(writeConfig(t, c.body), serveOverrides{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestServeConfigNamesTheSigningKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, keys string
		want       signingKeys
	}{
		{"none: the data dir's signing.key", ``, signingKeys{}},
		{"a key file", `,"signing_key_file":"/k.pem"`, signingKeys{File: "/k.pem"}},
		{"a key dir", `,"signing_key_dir":"/etc/sandgate/keys"`, signingKeys{Dir: "/etc/sandgate/keys"}},
		{"key files and the active kid", `,"signing_key_files":["/a.pem","/b.pem"],"signing_key_active_kid":"kidB"`,
			signingKeys{Files: []string{"/a.pem", "/b.pem"}, ActiveKID: "kidB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := loadServeConfig(writeConfig(t, `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"}`+tc.keys+`}`), serveOverrides{})
			if err != nil || !reflect.DeepEqual(o.Keys, tc.want) {
				t.Fatalf("keys %+v, %v; want %+v", o.Keys, err, tc.want)
			}
		})
	}
}

func TestTokenMintRecordsAVerifiableToken(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	code, out, stderr := runCLI(t, "", "token", "mint", "--offline", "--role", "agent", "--subject", "ci", "--ttl", "1h", "--data", data)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw := strings.TrimSpace(out)
	iss, created, err := openIssuer(data, signingKeys{}, "", "")
	if err != nil || created {
		t.Fatalf("the mint did not leave a signing key: created=%v err=%v", created, err)
	}
	claims, err := iss.Verify(raw)
	if err != nil || claims.Subject != "ci" || claims.Role != "agent" {
		t.Fatalf("verify: %+v %v", claims, err)
	}
	st, err := openStore(t.Context(), data)
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
	if code, _, _ := runCLI(t, "", "token", "mint", "--offline", "--role", "session", "--data", data); code != exitError {
		t.Fatalf("a session token was minted offline: exit %d", code)
	}
}

// selfSignedCert writes a certificate and key for 127.0.0.1 and returns
// their paths and a pool that trusts the certificate.
func selfSignedCert(t *testing.T) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandgate-test"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// The production entry runs end to end: TLS, the store, the enrolled
// nodes from the config, readiness against Nomad (the simulator here).
func TestServeRunsTheGatewayOverTLS(t *testing.T) {
	t.Parallel()
	simAddr, closeSim, err := startSimulator()
	if err != nil {
		t.Fatal(err)
	}
	defer closeSim()
	certFile, keyFile, pool := selfSignedCert(t)
	data := t.TempDir()
	cfg := `{"listen":"127.0.0.1:0","data_dir":"` + data + `",
	  "tls":{"cert_file":"` + certFile + `","key_file":"` + keyFile + `"},
	  "nomad":{"address":"http://` + simAddr + `"},
	  "nodes":[{"name":"worker-1","max_sandboxes":3}]}`
	o, err := loadServeConfig(writeConfig(t, cfg), serveOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	o.Ready = func(a string, _ *token.Issuer, _ store.Store, _ policies.Settings) error { addr <- a; return nil }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runGateway(ctx, o, io.Discard) }()
	var base string
	select {
	case a := <-addr:
		base = "https://" + a
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not become ready")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ready":true`) || strings.Contains(string(body), `"simulated":true`) {
		t.Fatalf("readyz over TLS: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve did not shut down cleanly: %v", err)
	}
	// the config's node was enrolled, with its budget
	st, err := openStore(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.GetNode(t.Context(), "worker-1")
	if err != nil || n.Enrollment != "sandbox" || n.MaxSandboxes != 3 {
		t.Fatalf("enrolled node: %+v %v", n, err)
	}
}

// The configuration's nodes go through the hosts decision: a control-plane
// node (P2) or an egress node that declares no isolation bundle (I5) stops
// the start, naming the rule, and nothing is enrolled.
func TestServeRefusesToEnrollWhatThePolicyRefuses(t *testing.T) {
	t.Parallel()
	simAddr, closeSim, err := startSimulator()
	if err != nil {
		t.Fatal(err)
	}
	defer closeSim()
	for _, c := range []struct{ name, node, rule string }{
		{"a control plane", `{"name":"control-1"}`, "P2"},
		{"egress without the isolation bundle", `{"name":"worker-1","egress":true}`, "I5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			cfg := `{"listen":"127.0.0.1:0","data_dir":"` + data + `","nomad":{"address":"http://` + simAddr + `"},"nodes":[` + c.node + `]}`
			o, err := loadServeConfig(writeConfig(t, cfg), serveOverrides{})
			if err != nil {
				t.Fatal(err)
			}
			o.Ready = func(string, *token.Issuer, store.Store, policies.Settings) error {
				t.Error("the gateway became ready")
				return nil
			}
			err = runGateway(t.Context(), o, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.rule) {
				t.Fatalf("err %v, want one naming %s", err, c.rule)
			}
			st, err := openStore(t.Context(), data)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if nodes, _ := st.ListNodes(t.Context()); len(nodes) != 0 {
				t.Fatalf("enrolled %+v", nodes)
			}
		})
	}
}

// The postgres DSN comes from SANDGATE_STORE_DSN first, then dsn_file,
// then dsn, so a password need never sit in the configuration file.
func TestServeTakesTheStoreDSNFromTheEnvironmentFirst(t *testing.T) {
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte("postgres://sandgate@db-file/sandgate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := `{"listen":"x","data_dir":"d","nomad":{"address":"http://n"},"store":{"driver":"postgres",%s"max_conns":8,"log_conns":3,"statement_timeout":"2s"}}`
	for _, tc := range []struct{ name, store, env, want string }{
		{"dsn", `"dsn":"postgres://sandgate@db-config/sandgate",`, "", "postgres://sandgate@db-config/sandgate"},
		{"dsn_file", `"dsn_file":"` + dsnFile + `",`, "", "postgres://sandgate@db-file/sandgate"},
		{"the environment over dsn_file", `"dsn_file":"` + dsnFile + `",`, "postgres://sandgate:pw@db-env/sandgate", "postgres://sandgate:pw@db-env/sandgate"},
		{"the environment alone", ``, "postgres://sandgate:pw@db-env/sandgate", "postgres://sandgate:pw@db-env/sandgate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envStoreDSN, tc.env)
			o, err := loadServeConfig(writeConfig(t, fmt.Sprintf(base, tc.store)), serveOverrides{})
			if err != nil {
				t.Fatal(err)
			}
			if o.Store.Driver != "postgres" || o.Store.DSN != tc.want || o.Store.Postgres.MaxConns != 8 || o.Store.Postgres.LogConns != 3 || o.Store.Postgres.StatementTimeout != 2*time.Second {
				t.Fatalf("store config %+v, want the DSN %q", o.Store, tc.want)
			}
		})
	}
}

// serve on a signing_key_dir signs with its active key and accepts a token
// of the other key; a key dir without an active key stops the start.
func TestServeSignsWithTheKeyDirsActiveKey(t *testing.T) {
	t.Parallel()
	simAddr, closeSim, err := startSimulator()
	if err != nil {
		t.Fatal(err)
	}
	defer closeSim()
	keys := filepath.Join(t.TempDir(), "keys")
	data := t.TempDir()
	gen := func() string {
		code, out, stderr := runCLI(t, "", "key", "generate", "--dir", keys)
		return strings.TrimSpace(mustOK(t, code, out, stderr))
	}
	kidA := gen()
	// An operator token of A, minted offline, then B is added and activated.
	code, out, stderr := runCLI(t, "", "token", "mint", "--offline", "--data", data, "--key-dir", keys, "--role", "operator", "--ttl", "1h")
	opA := strings.TrimSpace(mustOK(t, code, out, stderr))
	kidB := gen()
	cfg := writeConfig(t, `{"listen":"127.0.0.1:0","data_dir":"`+data+`","signing_key_dir":"`+keys+`","nomad":{"address":"http://`+simAddr+`"}}`)

	// B is not active yet: A signs.
	o, err := loadServeConfig(cfg, serveOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(keys, token.ActiveFile)); err != nil {
		t.Fatal(err)
	}
	if err := runGateway(t.Context(), o, io.Discard); err == nil || !errors.Is(err, token.ErrKeySet) || !strings.Contains(err.Error(), "sandgate key activate") {
		t.Fatalf("a key dir without an active key: %v", err)
	}
	if code, out, stderr := runCLI(t, "", "key", "activate", "--dir", keys, kidB); code != exitOK {
		t.Fatalf("activate: %d %s %s", code, out, stderr)
	}

	type ready struct {
		addr string
		iss  *token.Issuer
	}
	up := make(chan ready, 1)
	o.Ready = func(a string, iss *token.Issuer, _ store.Store, _ policies.Settings) error {
		up <- ready{a, iss}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runGateway(ctx, o, io.Discard) }()
	var r ready
	select {
	case r = <-up:
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not become ready")
	}
	if r.iss.KeyID() != kidB || len(r.iss.KeyIDs()) != 2 {
		t.Errorf("serve signs with %s of %v; want %s of two", r.iss.KeyID(), r.iss.KeyIDs(), kidB)
	}
	// A's operator token still works on the gateway that signs with B.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+r.addr+"/v1/tokens", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+opA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/tokens with A's operator token (%s) on a gateway signing with B: %d", kidA, resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve did not shut down cleanly: %v", err)
	}
}

// --listen and --replica take the place of the file's fields: replicas of
// one deployment share the file and differ in these; the file's listen is
// then not required.
func TestServeFlagsTakeThePlaceOfTheFilesListenAndReplica(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `{"listen":"127.0.0.1:8443","replica":"from-file","data_dir":"d","nomad":{"address":"http://n"}}`)
	o, err := loadServeConfig(path, serveOverrides{})
	if err != nil || o.Listen != "127.0.0.1:8443" || o.Replica != "from-file" {
		t.Fatalf("without flags: %q %q %v", o.Listen, o.Replica, err)
	}
	o, err = loadServeConfig(path, serveOverrides{Listen: "0.0.0.0:24123", Replica: "sandgate.gateway[1]"})
	if err != nil || o.Listen != "0.0.0.0:24123" || o.Replica != "sandgate.gateway[1]" {
		t.Fatalf("with flags: %q %q %v", o.Listen, o.Replica, err)
	}
	noListen := writeConfig(t, `{"data_dir":"d","nomad":{"address":"http://n"}}`)
	if _, err := loadServeConfig(noListen, serveOverrides{}); err == nil || !strings.Contains(err.Error(), "listen is required") {
		t.Fatalf("no listen anywhere: %v", err)
	}
	if o, err := loadServeConfig(noListen, serveOverrides{Listen: "127.0.0.1:0"}); err != nil || o.Listen != "127.0.0.1:0" {
		t.Fatalf("listen from the flag alone: %q %v", o.Listen, err)
	}
}
