package gateway

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"sandgate/gateway/wire"
	"sandgate/policies"
)

// fakeLimits is a limitSource whose numbers a test sets.
type fakeLimits struct {
	mu     sync.Mutex
	limits map[string]policies.RateLimit
}

func (f *fakeLimits) Settings() policies.Settings {
	f.mu.Lock()
	defer f.mu.Unlock()
	return policies.Settings{RateLimits: f.limits}
}

func (f *fakeLimits) Revision() string { return "test" }

// fakeNow is a settable clock.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTestLimiter(maxKeys int) (*rateLimiter, *fakeNow) {
	clock := &fakeNow{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	src := &fakeLimits{limits: map[string]policies.RateLimit{"agent": {RequestsPerSecond: 2, Burst: 4}}}
	return newRateLimiter(src, clock.now, 10*time.Second, maxKeys), clock
}

func TestIdleBucketsAreEvictedOnceTheyHaveRefilled(t *testing.T) {
	t.Parallel()
	rl, clock := newTestLimiter(100_000)
	for i := range 1000 {
		if v := rl.take(fmt.Sprintf("p agent:%d", i), "agent", fmt.Sprintf("agent:%d", i)); !v.ok {
			t.Fatalf("principal %d's first request was refused", i)
		}
	}
	if n := rl.size(); n != 1000 {
		t.Fatalf("%d buckets for 1000 principals", n)
	}
	// A bucket of burst 4 at 2 a second is full again after 2 s; one
	// window later every idle one is gone, and the caller keeps its own.
	clock.advance(10 * time.Second)
	rl.take("p agent:busy", "agent", "agent:busy")
	if n := rl.size(); n != 1 {
		t.Fatalf("%d buckets after every principal but one went idle, want 1", n)
	}
}

func TestABucketWithRefusalsToReportIsKeptUntilReported(t *testing.T) {
	t.Parallel()
	rl, clock := newTestLimiter(100_000)
	refused := 0
	for range 100 {
		if !rl.take("p agent:x", "agent", "agent:x").ok {
			refused++
		}
	}
	if refused != 96 {
		t.Fatalf("%d of 100 requests refused at once, want 96 past a burst of 4", refused)
	}
	clock.advance(5 * time.Second)
	if due := rl.flush(); len(due) != 0 {
		t.Fatalf("a window was reported before it ended: %+v", due)
	}
	clock.advance(5 * time.Second)
	due := rl.flush()
	if len(due) != 1 || due[0].name != "agent:x" || due[0].count != 96 || due[0].class != "agent" {
		t.Fatalf("due = %+v, want one window of agent:x with 96 refusals", due)
	}
	if due := rl.flush(); len(due) != 0 {
		t.Fatalf("a window was reported twice: %+v", due)
	}
	if n := rl.size(); n != 0 {
		t.Fatalf("%d buckets left after the window was reported and the bucket refilled", n)
	}
}

func TestPastMaxKeysNewPrincipalsShareOneOverflowBucket(t *testing.T) {
	t.Parallel()
	rl, _ := newTestLimiter(10)
	admitted := 0
	for i := range 50 {
		if rl.take(fmt.Sprintf("p agent:%d", i), "agent", fmt.Sprintf("agent:%d", i)).ok {
			admitted++
		}
	}
	if n := rl.size(); n != 11 {
		t.Fatalf("%d buckets, want 10 and the overflow bucket", n)
	}
	if admitted != 10+4 { // the first ten, then the overflow bucket's burst
		t.Fatalf("%d requests admitted, want 14", admitted)
	}
}

func TestARoleWithoutALimitIsRefused(t *testing.T) {
	t.Parallel()
	rl, _ := newTestLimiter(10)
	if v := rl.take("p session:x", "session", "session:x"); v.ok || !v.noLimit {
		t.Fatalf("a role policy data gives no limit: %+v", v)
	}
}

func TestRetryAfterIsTheBucketsDelayRoundedUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		delay time.Duration
		want  int
	}{{time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {20 * time.Second, 20}} {
		if p := rateLimited(verdict{retry: c.delay}, "x"); p.RetryAfter != time.Duration(c.want)*time.Second || p.Status != 429 || p.Code != wire.CodeRateLimited {
			t.Errorf("delay %s: Retry-After %d status %d, want %d", c.delay, p.RetryAfter/time.Second, p.Status, c.want)
		}
	}
}

func TestTheClientAddressBelievesOnlyTrustedProxies(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, c := range []struct {
		name, peer, xff string
		trusted         []netip.Prefix
		want            string
	}{
		{"the peer, with no proxy trusted", "192.0.2.1:1234", "203.0.113.5", nil, "192.0.2.1"},
		{"the peer, when it is not a trusted proxy", "192.0.2.1:1234", "203.0.113.5", trusted, "192.0.2.1"},
		{"the client a trusted proxy names", "10.0.0.1:1234", "203.0.113.5", trusted, "203.0.113.5"},
		{"the last hop before the trusted proxies", "10.0.0.1:1234", "198.51.100.1, 203.0.113.5, 10.0.0.2", trusted, "203.0.113.5"},
		{"the proxy itself, without the header", "10.0.0.1:1234", "", trusted, "10.0.0.1"},
		{"the last believed hop, before a malformed one", "10.0.0.1:1234", "203.0.113.5, not-an-ip", trusted, "10.0.0.1"},
		{"an IPv6 client's /64", "[2001:db8:1:2:3:4:5:6]:443", "", nil, "2001:db8:1:2::/64"},
		{"an IPv4 peer written as IPv6", "[::ffff:192.0.2.9]:443", "", nil, "192.0.2.9"},
		{"no address at all", "mcp", "", nil, "unknown"},
	} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.RemoteAddr = c.peer
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := clientAddress(req, c.trusted); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The cost of one bucket check on the request path (a principal's
// bucket, admitted):
//
//	go test -run '^$' -bench RateLimiterTake -benchmem ./gateway/
func BenchmarkRateLimiterTake(b *testing.B) {
	clock := &fakeNow{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	src := &fakeLimits{limits: map[string]policies.RateLimit{"agent": {RequestsPerSecond: 1e9, Burst: 1 << 30}, "operator": {RequestsPerSecond: 1, Burst: 1}}}
	rl := newRateLimiter(src, clock.now, 10*time.Second, 100_000)
	for b.Loop() {
		if !rl.take("p agent:x", "agent", "agent:x").ok {
			b.Fatal("refused")
		}
	}
}
