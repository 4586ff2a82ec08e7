package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"sandgate/store"
)

// Spread returns one store.Store that hands each call to the next of
// replicas in turn: several handles on one shared database, as several
// gateways hold them. Run over Spread checks that the contract holds
// across gateways, racing cases included: two reservations of a node's
// last slot, or of one idempotency key, made through different handles.
// Close closes every handle.
func Spread(replicas ...store.Store) store.Store {
	return &spread{replicas: replicas}
}

type spread struct {
	replicas []store.Store
	next     atomic.Uint64
}

func (s *spread) pick() store.Store {
	return s.replicas[(s.next.Add(1)-1)%uint64(len(s.replicas))]
}

// Reserve hands the call to the next replica.
func (s *spread) Reserve(ctx context.Context, rec store.Sandbox, admit func(store.ReserveFacts) error) error {
	return s.pick().Reserve(ctx, rec, admit)
}

// Get hands the call to the next replica.
func (s *spread) Get(ctx context.Context, id string) (store.Sandbox, error) {
	return s.pick().Get(ctx, id)
}

// ByIdempotencyKey hands the call to the next replica.
func (s *spread) ByIdempotencyKey(ctx context.Context, key string, since time.Time) (store.Sandbox, error) {
	return s.pick().ByIdempotencyKey(ctx, key, since)
}

// List hands the call to the next replica.
func (s *spread) List(ctx context.Context, f store.Filter) ([]store.Sandbox, error) {
	return s.pick().List(ctx, f)
}

// ListPage hands the call to the next replica.
func (s *spread) ListPage(ctx context.Context, q store.Query) (store.Page, error) {
	return s.pick().ListPage(ctx, q)
}

// Due hands the call to the next replica.
func (s *spread) Due(ctx context.Context, at time.Time) ([]store.Sandbox, error) {
	return s.pick().Due(ctx, at)
}

// Counts hands the call to the next replica.
func (s *spread) Counts(ctx context.Context) (map[store.State]int64, error) {
	return s.pick().Counts(ctx)
}

// Spec hands the call to the next replica.
func (s *spread) Spec(ctx context.Context, id string) ([]byte, error) {
	return s.pick().Spec(ctx, id)
}

// Prune hands the call to the next replica.
func (s *spread) Prune(ctx context.Context, endedBefore time.Time, limit int) (int, error) {
	return s.pick().Prune(ctx, endedBefore, limit)
}

// Update hands the call to the next replica.
func (s *spread) Update(ctx context.Context, id string, mutate func(*store.Sandbox) error) (store.Sandbox, error) {
	return s.pick().Update(ctx, id, mutate)
}

// NodeUsage hands the call to the next replica.
func (s *spread) NodeUsage(ctx context.Context, node string) (store.Usage, error) {
	return s.pick().NodeUsage(ctx, node)
}

// PutNode hands the call to the next replica.
func (s *spread) PutNode(ctx context.Context, n store.Node) error { return s.pick().PutNode(ctx, n) }

// GetNode hands the call to the next replica.
func (s *spread) GetNode(ctx context.Context, name string) (store.Node, error) {
	return s.pick().GetNode(ctx, name)
}

// ListNodes hands the call to the next replica.
func (s *spread) ListNodes(ctx context.Context) ([]store.Node, error) { return s.pick().ListNodes(ctx) }

// DeleteNode hands the call to the next replica.
func (s *spread) DeleteNode(ctx context.Context, name string) error {
	return s.pick().DeleteNode(ctx, name)
}

// PutToken hands the call to the next replica.
func (s *spread) PutToken(ctx context.Context, t store.Token) error { return s.pick().PutToken(ctx, t) }

// GetToken hands the call to the next replica.
func (s *spread) GetToken(ctx context.Context, jti string) (store.Token, error) {
	return s.pick().GetToken(ctx, jti)
}

// ListTokens hands the call to the next replica.
func (s *spread) ListTokens(ctx context.Context) ([]store.Token, error) {
	return s.pick().ListTokens(ctx)
}

// RevokeToken hands the call to the next replica.
func (s *spread) RevokeToken(ctx context.Context, jti string, at time.Time) error {
	return s.pick().RevokeToken(ctx, jti, at)
}

// TouchToken hands the call to the next replica.
func (s *spread) TouchToken(ctx context.Context, jti string, at time.Time) error {
	return s.pick().TouchToken(ctx, jti, at)
}

// Ping hands the call to the next replica.
func (s *spread) Ping(ctx context.Context) error { return s.pick().Ping(ctx) }

// Close closes every replica.
func (s *spread) Close() error {
	var errs []error
	for _, r := range s.replicas {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
