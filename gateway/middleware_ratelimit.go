package gateway

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"sandgate/gateway/audit"
	"sandgate/gateway/wire"
	"sandgate/policies"
)

// Fair use (rule Q1, docs/api.md "Rate limits"): every principal (role and
// subject) has a token bucket of its role's numbers, and every client
// address one of the anonymous numbers, both from policy data
// (data.sandgate.config.rate_limits). A request past its bucket is refused
// with 429 rate_limited and Retry-After before the authz decision, so a
// flood costs no policy evaluation and writes no decision-log line per
// request: one aggregated line per principal and window says how many were
// refused. The buckets are golang.org/x/time/rate limiters driven by the
// gateway's clock (Config.Now).

// ctxRateChecked marks a request a bucket admitted; authorize refuses one
// without it, so a route wired without its limiter serves nothing.
const ctxRateChecked = "sandgate.rate_checked"

// limitSource is where the numbers come from: the serving bundle
// (*policies.Engine).
type limitSource interface {
	Settings() policies.Settings
	Revision() string
}

// limitTable is one bundle's rate limits; it is replaced whole (atomic
// swap) when a reload brings other numbers, and buckets adopt them on
// their next request.
type limitTable struct {
	revision string
	limits   map[string]policies.RateLimit
}

// bucket is one principal's or one address's limiter.
type bucket struct {
	lim   *rate.Limiter
	limit policies.RateLimit // what lim is set to
	class string             // the role, or policies.RateLimitAnonymous
	name  string             // the principal, or "anonymous:<address>"
	last  time.Time          // the last request it saw
	// limited counts the requests refused since since, the first one of
	// the window not yet reported.
	limited int
	since   time.Time
}

// limitedWindow is what one aggregated log line reports.
type limitedWindow struct {
	name, class, revision string
	count                 int
	since, until          time.Time
}

// rateLimiter holds the buckets. Buckets idle long enough to have refilled
// are evicted (a full bucket is a new one), and past maxKeys new keys of a
// class share one overflow bucket, so memory stays bounded whoever calls.
type rateLimiter struct {
	src     limitSource
	now     func() time.Time
	window  time.Duration
	maxKeys int
	// onTable runs when a table with other numbers is swapped in (the
	// metric's series of each class are initialised).
	onTable func(*limitTable)
	// onLimited counts one refused request of class.
	onLimited func(class string)

	table atomic.Pointer[limitTable]

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

func newRateLimiter(src limitSource, now func() time.Time, window time.Duration, maxKeys int) *rateLimiter {
	return &rateLimiter{src: src, now: now, window: window, maxKeys: maxKeys, buckets: map[string]*bucket{},
		onTable: func(*limitTable) {}, onLimited: func(string) {}}
}

// current returns the serving bundle's table, swapping in a new one when
// the bundle's numbers changed since the last request.
func (rl *rateLimiter) current() *limitTable {
	limits := rl.src.Settings().RateLimits
	t := rl.table.Load()
	if t != nil && maps.Equal(t.limits, limits) {
		return t
	}
	nt := &limitTable{revision: rl.src.Revision(), limits: maps.Clone(limits)}
	if rl.table.CompareAndSwap(t, nt) {
		rl.onTable(nt)
		return nt
	}
	return rl.table.Load()
}

// verdict is what a bucket said of one request.
type verdict struct {
	ok bool
	// noLimit: the bundle gives the class no limit (Q1); refused.
	noLimit bool
	limit   policies.RateLimit
	// retry is how long until the bucket admits a request again.
	retry time.Duration
	// due are the windows whose aggregated lines are now due.
	due []limitedWindow
}

// take asks key's bucket (of class, named name in logs) for one request.
func (rl *rateLimiter) take(key, class, name string) verdict {
	t := rl.current()
	limit, ok := t.limits[class]
	if !ok || !limit.Valid() {
		return verdict{noLimit: true}
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	now := rl.now()
	var v verdict
	if now.Sub(rl.lastSweep) >= rl.window || now.Before(rl.lastSweep) {
		v.due = rl.sweepLocked(now, t)
	}
	b := rl.buckets[key]
	if b == nil {
		if len(rl.buckets) >= rl.maxKeys {
			key, name = class+" overflow", class+":(overflow)"
			b = rl.buckets[key]
		}
		if b == nil {
			b = &bucket{lim: rate.NewLimiter(rate.Limit(limit.RequestsPerSecond), limit.Burst), limit: limit, class: class, name: name}
			rl.buckets[key] = b
		}
	}
	if b.limit != limit { // a reload brought other numbers
		b.lim.SetLimitAt(now, rate.Limit(limit.RequestsPerSecond))
		b.lim.SetBurstAt(now, limit.Burst)
		b.limit = limit
	}
	b.last = now
	v.limit = limit
	r := b.lim.ReserveN(now, 1)
	if !r.OK() { // burst < 1: Valid refuses it, but never admit
		return verdict{noLimit: true, due: v.due}
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		if b.limited == 0 {
			b.since = now
		}
		b.limited++
		rl.onLimited(class)
		v.retry = d
		return v
	}
	v.ok = true
	return v
}

// sweepLocked collects the windows that are due and evicts the buckets
// that are full again and have nothing left to report.
func (rl *rateLimiter) sweepLocked(now time.Time, t *limitTable) []limitedWindow {
	rl.lastSweep = now
	var due []limitedWindow
	for key, b := range rl.buckets {
		if b.limited > 0 && now.Sub(b.since) >= rl.window {
			due = append(due, limitedWindow{name: b.name, class: b.class, revision: t.revision, count: b.limited, since: b.since, until: now})
			b.limited = 0
		}
		if b.limited == 0 && now.Sub(b.last) >= b.refill() {
			delete(rl.buckets, key)
		}
	}
	slices.SortFunc(due, func(a, b limitedWindow) int { return strings.Compare(a.name, b.name) })
	return due
}

// refill is how long the bucket takes to fill from empty: idle that long,
// it is indistinguishable from a new one.
func (b *bucket) refill() time.Duration {
	return time.Duration(math.Ceil(float64(b.limit.Burst) / b.limit.RequestsPerSecond * float64(time.Second)))
}

// flush reports every window that is due (the background loop calls it, so
// a flood's last window is reported even when nothing follows it).
func (rl *rateLimiter) flush() []limitedWindow {
	t := rl.current()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.sweepLocked(rl.now(), t)
}

// size is how many buckets are held (tests).
func (rl *rateLimiter) size() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.buckets)
}

// limitPrincipal is the middleware between authenticate and authorize: the
// caller's principal takes one request from its role's bucket.
func (s *Server) limitPrincipal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		cl := callerOf(c)
		if cl == nil { // authenticate did not run: refuse, never allow
			return unauthenticated("no authenticated caller")
		}
		role, principal := string(cl.claims.Role), cl.principal()
		v := s.limits.take("p "+principal, role, principal)
		s.reportLimited(v.due)
		switch {
		case v.noLimit:
			p := newProblem(http.StatusForbidden, wire.CodePolicyDenied, "policy data gives role "+role+" no rate limit (rate_limits."+role+")")
			p.RuleIDs = []string{"Q1"}
			return p
		case !v.ok:
			return rateLimited(v, "principal "+principal+" is over the rate limit of role "+role)
		}
		c.Set(ctxRateChecked, true)
		return next(c)
	}
}

// limitAddress is the middleware of the routes that take no token: the
// client address (Config.TrustedProxies) takes one request from its
// bucket of the anonymous numbers.
func (s *Server) limitAddress(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		addr := clientAddress(c.Request(), s.cfg.TrustedProxies)
		v := s.limits.take("a "+addr, policies.RateLimitAnonymous, policies.RateLimitAnonymous+":"+addr)
		s.reportLimited(v.due)
		switch {
		case v.noLimit:
			return newProblem(http.StatusServiceUnavailable, wire.CodeUnavailable, "policy data gives the anonymous routes no rate limit (rate_limits.anonymous)")
		case !v.ok:
			return rateLimited(v, "address "+addr+" is over the rate limit of the routes that take no token")
		}
		return next(c)
	}
}

// rateLimited is the 429 of a request its bucket refused; Retry-After is
// the bucket's delay, rounded up to whole seconds.
func rateLimited(v verdict, who string) *Problem {
	secs := max(1, int(math.Ceil(v.retry.Seconds())))
	p := newProblem(http.StatusTooManyRequests, wire.CodeRateLimited, fmt.Sprintf("%s (%g requests per second, burst %d, policy data rate_limits); retry after %d s",
		who, v.limit.RequestsPerSecond, v.limit.Burst, secs))
	p.RuleIDs = []string{"Q1"}
	p.RetryAfter = time.Duration(secs) * time.Second
	return p
}

// reportLimited writes the aggregated lines that are due: one operational
// log line per principal or address and window, and for a principal one
// decision-log entry (entrypoint "rate_limit", rule Q1), so the audit trail
// says who was refused and how often without a line per request. An
// address's windows go to the operational log only: anyone can send them.
func (s *Server) reportLimited(due []limitedWindow) {
	for _, w := range due {
		window := w.until.Sub(w.since).Round(time.Second)
		s.log.Info("rate_limited", "principal", w.name, "role", w.class, "count", w.count, "window", window.String(),
			"since", w.since.UTC().Format(time.RFC3339), "bundle_revision", w.revision)
		if w.class == policies.RateLimitAnonymous {
			continue
		}
		err := s.cfg.Decisions.Write(audit.Entry{
			Time: w.until.UTC(), DecisionID: randomHex(16), Entrypoint: "rate_limit", Revision: w.revision,
			RuleIDs: []string{"Q1"}, Principal: w.name,
			Action: fmt.Sprintf("rate_limited count=%d window=%s since=%s", w.count, window, w.since.UTC().Format(time.RFC3339)),
		})
		if err != nil {
			s.log.Warn("record rate limiting in the decision log", "principal", w.name, "err", err)
		}
	}
}

// FlushRateLimits reports the rate-limited windows that are due; Run calls
// it every window.
func (s *Server) FlushRateLimits() { s.reportLimited(s.limits.flush()) }

// rateChecked reports whether a bucket admitted the request.
func rateChecked(c echo.Context) bool {
	ok, _ := c.Get(ctxRateChecked).(bool)
	return ok
}

// clientAddress is the key of a request's anonymous bucket: the peer's
// address, or, when the peer is one of the trusted proxies, the rightmost
// address of X-Forwarded-For that is not one (a client can prepend
// anything; only what the proxies appended is believed). An IPv6 client is
// keyed by its /64, which one host usually holds whole.
func clientAddress(r *http.Request, trusted []netip.Prefix) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return "unknown"
	}
	ip := ap.Addr().Unmap()
	if inPrefixes(ip, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values(echo.HeaderXForwardedFor), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a malformed hop: keep the last address believed
			}
			ip = a.Unmap()
			if !inPrefixes(ip, trusted) {
				break
			}
		}
	}
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

func inPrefixes(ip netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
