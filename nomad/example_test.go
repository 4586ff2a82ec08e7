package nomad

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Build the client from an explicit Config (in cmd/, from flags): nothing is
// read from NOMAD_* variables.
func ExampleNew() {
	cfg := DefaultConfig()
	cfg.Address = "https://nomad.internal:4646"
	cfg.Token = "secret-id-from-a-file"
	cfg.Namespace = "sandboxes"
	cfg.JobPrefix = "sandgate-sbx-"
	cfg.TLS.CACert = "/etc/sandgate/nomad-ca.pem"
	cfg.Observe = func(string, time.Duration, error) { /* count, time */ }
	fmt.Println(cfg)

	cfg.JobPrefix = ""
	_, err := New(cfg)
	fmt.Println(errors.Is(err, ErrInvalidConfig), err)
	// Output:
	// nomad.Config{Address: "https://nomad.internal:4646", Region: "", Namespace: "sandboxes", JobPrefix: "sandgate-sbx-", Token: redacted, TLS: true, Timeout: 10s, PollInterval: 100ms}
	// true nomad: invalid config: JobPrefix is required
}

// A job outside the prefix never reaches Nomad; callers branch on the
// sentinels, never on the text.
func ExampleClient_Purge() {
	c, err := New(Config{Address: "http://127.0.0.1:4646", JobPrefix: "sandgate-sbx-"})
	if err != nil {
		panic(err)
	}
	err = c.Purge(context.Background(), "billing-api")
	var e *Error
	fmt.Println(errors.Is(err, ErrForbiddenJob), errors.As(err, &e) && e.Op == OpPurge)
	fmt.Println(err)
	// Output:
	// true true
	// nomad: purge: job outside the gateway's prefix: job id "billing-api" lacks the prefix "sandgate-sbx-"
}
