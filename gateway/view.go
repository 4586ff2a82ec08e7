package gateway

import (
	"encoding/json"
	"io"
	"time"

	"sandgate/gateway/wire"
	"sandgate/store"
)

// timeFormat is how times appear in responses: RFC 3339 in UTC.
const timeFormat = time.RFC3339

// viewOf is a sandbox as the API shows it.
func viewOf(r store.Sandbox) wire.Sandbox {
	v := wire.Sandbox{
		ID: r.ID, State: string(r.State), Node: r.Node, Profile: r.Profile, Network: r.Network, Image: r.Image,
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
