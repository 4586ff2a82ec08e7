package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"sandgate/gateway/token"
	"sandgate/gateway/wire"
	"sandgate/store"
)

// headerIdempotencyKey names a create's idempotency key: the same key and
// body from the same principal within store.IdempotencyWindow answer the
// same sandbox.
const headerIdempotencyKey = "Idempotency-Key"

// maxIdempotencyKey bounds the key's length, in bytes.
const maxIdempotencyKey = 255

// idempotency is a create's key, as the store holds it, and its body's
// digest.
type idempotency struct {
	key    string // hex SHA-256 of principal, NUL, the header's value
	digest string // hex SHA-256 of the body, without wait_seconds and reissue_token
}

// idempotencyOf reads the Idempotency-Key header of a create; nil without
// one. A key that is empty-but-sent, too long or not visible ASCII is a 400
// naming the header.
func idempotencyOf(c echo.Context, cl *caller, body *createRequest) (*idempotency, error) {
	values := c.Request().Header.Values(headerIdempotencyKey)
	if len(values) == 0 {
		return nil, nil
	}
	raw := values[0]
	if len(values) > 1 || raw == "" || len(raw) > maxIdempotencyKey || !visibleASCII(raw) {
		return nil, invalid(headerIdempotencyKey, "must be one header of 1 to %d visible ASCII characters", maxIdempotencyKey)
	}
	key := sha256.Sum256([]byte(cl.principal() + "\x00" + raw))
	same := digestedCreate(*body)
	same.WaitSeconds, same.ReissueToken = nil, nil // how long to wait and a new token change no sandbox
	b, err := json.Marshal(same)                   // map keys sorted: one body, one digest
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(b)
	return &idempotency{key: hex.EncodeToString(key[:]), digest: hex.EncodeToString(digest[:])}, nil
}

// digestedCreate is the shape a create's body is digested in: every
// member, null where the body left it out, and an empty labels object
// apart from none. wire.CreateRequest leaves out what is nil (so a client
// sends only what it sets); the digests the store holds were taken in
// this shape, and a repeat must keep matching them. Converting a
// createRequest to it does not compile once the two differ in a member.
type digestedCreate struct {
	Profile      *string           `json:"profile"`
	Network      *string           `json:"network"`
	TTLSeconds   *int64            `json:"ttl_seconds"`
	Node         *string           `json:"node"`
	CPUMHz       *int64            `json:"cpu_mhz"`
	MemoryMB     *int64            `json:"memory_mb"`
	Image        *string           `json:"image"`
	Labels       map[string]string `json:"labels"`
	WaitSeconds  *int64            `json:"wait_seconds"`
	ReissueToken *bool             `json:"reissue_token"`
}

func visibleASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// earlierCreate returns the sandbox an earlier create with idem's key made
// within the window, if any.
func (s *Server) earlierCreate(c echo.Context, idem *idempotency) (store.Sandbox, bool, error) {
	since := s.cfg.Now().Add(-store.IdempotencyWindow)
	rec, err := s.cfg.Store.ByIdempotencyKey(c.Request().Context(), idem.key, since)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Sandbox{}, false, nil
	case err != nil:
		return store.Sandbox{}, false, unavailable("the store could not be read; nothing was changed", err)
	}
	return rec, true, nil
}

// answerRepeat answers a create repeated with its key: 422 when the body
// differs; otherwise 200 with the sandbox the key created (marked
// Idempotent-Replayed), and a fresh session token, revoking the old one,
// when the caller asks with reissue_token and the sandbox is live.
func (s *Server) answerRepeat(c echo.Context, body *createRequest, idem *idempotency, rec store.Sandbox) error {
	if rec.RequestDigest != idem.digest {
		return newProblem(http.StatusUnprocessableEntity, wire.CodeIdempotencyKeyReused,
			"this Idempotency-Key created sandbox "+rec.ID+" with another body in the last 24 h; send that body again or use a new key")
	}
	v := viewOf(rec)
	reissued := false
	if deref(body.ReissueToken, false) && rec.State.Live() {
		raw, claims, err := s.cfg.Tokens.Mint(token.MintRequest{
			Role: token.RoleSession, Subject: rec.ID, SandboxID: rec.ID,
			Scopes: s.cfg.Engine.Settings().SessionScopes(), ExpiresAt: rec.CeilingAt,
		})
		if err != nil {
			return err
		}
		updated, err := s.cfg.Store.Update(c.Request().Context(), rec.ID, func(r *store.Sandbox) error {
			if !r.State.Live() {
				return errNotLive
			}
			r.TokenDigest, r.TokenJTI = token.Digest(raw), claims.ID
			return nil
		})
		switch {
		case errors.Is(err, errNotLive): // ended meanwhile: answered as it was read, without a token
		case err != nil:
			return unavailable("the new session token could not be recorded; the old one still holds", err)
		default:
			v, reissued = viewOf(updated), true
			v.Token = raw
			s.log.Info("session token reissued on a repeated create", "sandbox", rec.ID, "jti", claims.ID)
		}
	}
	v.TokenReissued = &reissued
	c.Response().Header().Set("Idempotent-Replayed", "true")
	return c.JSON(http.StatusOK, v)
}
