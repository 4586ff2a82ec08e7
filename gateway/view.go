package gateway

import (
	"encoding/json"
	"io"
	"time"

	"sandgate/store"
)

// timeFormat is how times appear in responses: RFC 3339 in UTC.
const timeFormat = time.RFC3339

// sandboxView is a sandbox as the API shows it.
type sandboxView struct {
	ID        string            `json:"id"`
	State     store.State       `json:"state"`
	Node      string            `json:"node"`
	Profile   string            `json:"profile"`
	Network   string            `json:"network"`
	Image     string            `json:"image"`
	CPUMHz    int64             `json:"cpu_mhz"`
	MemoryMB  int64             `json:"memory_mb"`
	Principal string            `json:"principal"`
	CreatedAt string            `json:"created_at"`
	ExpiresAt string            `json:"expires_at"`
	CeilingAt string            `json:"ceiling_at"`
	Labels    map[string]string `json:"labels"`
	EndedAt   string            `json:"ended_at,omitempty"`
	EndReason string            `json:"end_reason,omitempty"`
	LastError string            `json:"last_error,omitempty"`
	// Token is the session token, present once: in the create response.
	Token string `json:"token,omitempty"`
	// Clamped is set by extend: true when the ceiling cut the request.
	Clamped *bool `json:"clamped,omitempty"`
	// TokenReissued is set on a create repeated with its Idempotency-Key:
	// true when Token is a fresh session token (the old one is revoked).
	TokenReissued *bool `json:"token_reissued,omitempty"`
}

func viewOf(r store.Sandbox) sandboxView {
	v := sandboxView{
		ID: r.ID, State: r.State, Node: r.Node, Profile: r.Profile, Network: r.Network, Image: r.Image,
		CPUMHz: r.CPUMHz, MemoryMB: r.MemoryMB, Principal: r.Principal,
		CreatedAt: r.CreatedAt.UTC().Format(timeFormat), ExpiresAt: r.ExpiresAt.UTC().Format(timeFormat),
		CeilingAt: r.CeilingAt.UTC().Format(timeFormat), Labels: r.Labels,
		EndReason: r.EndReason, LastError: r.LastError,
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if !r.EndedAt.IsZero() {
		v.EndedAt = r.EndedAt.UTC().Format(timeFormat)
	}
	return v
}

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
