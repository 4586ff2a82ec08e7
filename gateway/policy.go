package gateway

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"sandgate/policies"
)

// policyView is GET /v1/policy: the serving bundle as a reviewer reads it.
type policyView struct {
	Revision string `json:"revision"`
	// Digest identifies the bundle's files (policies.BundleDigest), so a
	// reviewer can tell the bundle in force from the one reviewed.
	Digest          string    `json:"digest"`
	DigestAlgorithm string    `json:"digest_algorithm"`
	LoadedAt        time.Time `json:"loaded_at"`
	// Signed says whether the bundle's signature was verified (a bundle
	// file served with policy.verification_key); Signer is the key id
	// that signed it.
	Signed bool   `json:"signed"`
	Signer string `json:"signer,omitempty"`
	// Rules are every annotated rule that can deny, sorted by entrypoint
	// and id, with its enforcement mode.
	Rules []policies.Rule `json:"rules"`
}

// getPolicy is GET /v1/policy: revision, digest, load time and every
// annotated rule of the bundle in force, read from one engine state.
func (s *Server) getPolicy(c echo.Context) error {
	info := s.cfg.Engine.Info()
	return c.JSON(http.StatusOK, policyView{
		Revision: info.Revision, Digest: info.Digest, DigestAlgorithm: policies.DigestAlgorithm,
		LoadedAt: info.LoadedAt, Signed: info.Signer != "", Signer: info.Signer, Rules: info.Rules,
	})
}
