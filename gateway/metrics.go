package gateway

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sandgate/nomad"
	"sandgate/policies"
	"sandgate/store"
)

// metrics are the gateway's Prometheus series.
type metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.HistogramVec
	decisionTime   *prometheus.HistogramVec
	decisions      *prometheus.CounterVec
	violations     *prometheus.CounterVec
	nomadTime      *prometheus.HistogramVec
	nomadErrors    *prometheus.CounterVec
	reaped         *prometheus.CounterVec
	reconcileFixes *prometheus.CounterVec
	pruned         prometheus.Counter
	reloads        *prometheus.CounterVec
	reloadTime     prometheus.Histogram
	rateLimited    *prometheus.CounterVec
	// routes are the route templates a request's route label may take;
	// anything else (an unmatched path) is "unmatched".
	routes map[string]bool
}

// knownMethods are the method label's values besides "other": an invented
// method must not add series (anyone can send one, without a token).
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func (m *metrics) methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

func (m *metrics) routeLabel(path string) string {
	if m.routes[path] {
		return path
	}
	return "unmatched"
}

func newMetrics(reg *prometheus.Registry, st store.Store) (*metrics, error) {
	m := &metrics{
		reg:    reg,
		routes: map[string]bool{},
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandgate_http_request_duration_seconds", Help: "API request latency by method, route template and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method", "route", "status"}),
		decisionTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandgate_policy_decision_duration_seconds", Help: "Policy evaluation latency by entrypoint.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14),
		}, []string{"entrypoint"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_policy_decisions_total", Help: "Policy decisions by entrypoint and result (allow, deny, error).",
		}, []string{"entrypoint", "result"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_policy_violations_total", Help: "Violations by entrypoint, rule id, enforcement mode (deny, warn, dryrun) and the decision's result (allow, deny).",
		}, []string{"entrypoint", "rule", "mode", "result"}),
		nomadTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandgate_nomad_request_duration_seconds", Help: "Nomad API call latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"op"}),
		nomadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_nomad_errors_total", Help: "Failed Nomad API calls by operation.",
		}, []string{"op"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_sandboxes_ended_total", Help: "Sandboxes ended, by reason.",
		}, []string{"reason"}),
		reconcileFixes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_reconcile_actions_total", Help: "Reconciliation actions by kind (orphan_job_purged, record_ended).",
		}, []string{"action"}),
	}
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandgate_policy_reloads_total", Help: "Policy bundle reloads by cause (signal, file) and result (applied, refused).",
	}, []string{"cause", "result"})
	m.reloadTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sandgate_policy_reload_duration_seconds", Help: "Time to build, verify, test and swap a policy bundle.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 10),
	})
	m.pruned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sandgate_sandbox_records_pruned_total", Help: "Terminal sandbox records deleted past their retention.",
	})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandgate_rate_limited_total", Help: "Requests refused with 429 rate_limited (Q1), by role (anonymous: the routes that take no token, per client address).",
	}, []string{"role"})
	cs := []prometheus.Collector{m.rateLimited, m.requests, m.decisionTime, m.decisions, m.violations, m.nomadTime,
		m.nomadErrors, m.reaped, m.reconcileFixes, m.pruned, m.reloads, m.reloadTime, &stateCollector{st: st}}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// A private registry gets the process and Go collectors too.
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m, nil
}

// endReasons are the reasons a sandbox ends with (end_reason, the reason
// label of sandgate_sandboxes_ended_total); a test holds the list to the
// reasons the gateway's code passes.
var endReasons = []string{
	"destroyed", "expired", "reclaimed", "lost", "disk_quota", "job_missing",
	"register_failed", "placement_failed", "placement_unknown", "start_timeout", "record_failed",
}

// reconcileActions are the action label's values of
// sandgate_reconcile_actions_total.
var reconcileActions = []string{"orphan_job_purged", "record_ended"}

// initSeries gives every labelled series whose label values are known at
// start its zero, so that each metric docs/api.md names is on /metrics
// from the first scrape (a counter that has not fired is 0, not missing,
// and rate() and alerts see it start). rules are the bundle's, for the
// violations' rule and mode labels. The request histogram's status label
// has no known set: its series appear with the first answered request.
func (m *metrics) initSeries(rules []policies.Rule) {
	for _, ep := range policies.EntrypointNames() {
		m.decisionTime.WithLabelValues(ep)
		for _, result := range []string{"allow", "deny", "error"} {
			m.decisions.WithLabelValues(ep, result)
		}
	}
	for _, r := range rules {
		mode := r.Mode
		if mode == "" {
			mode = policies.ModeDeny
		}
		m.violations.WithLabelValues(string(r.Entrypoint), r.ID, mode, "deny")
		if mode != policies.ModeDeny { // a softened rule's violation may come with an allow
			m.violations.WithLabelValues(string(r.Entrypoint), r.ID, mode, "allow")
		}
	}
	for _, op := range nomad.Ops() {
		m.nomadTime.WithLabelValues(op)
		m.nomadErrors.WithLabelValues(op)
	}
	for _, reason := range endReasons {
		m.reaped.WithLabelValues(reason)
	}
	for _, a := range reconcileActions {
		m.reconcileFixes.WithLabelValues(a)
	}
	for _, cause := range []string{"signal", "file", "other"} {
		for _, result := range []string{"applied", "refused"} {
			m.reloads.WithLabelValues(cause, result)
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *metrics) observeDecision(d policies.Decision, err error) {
	ep := string(d.Entrypoint)
	m.decisionTime.WithLabelValues(ep).Observe(d.Duration.Seconds())
	switch {
	case err != nil:
		m.decisions.WithLabelValues(ep, "error").Inc()
	case d.Allow:
		m.decisions.WithLabelValues(ep, "allow").Inc()
	default:
		m.decisions.WithLabelValues(ep, "deny").Inc()
	}
	if err != nil {
		return
	}
	result := "deny"
	if d.Allow {
		result = "allow"
	}
	// Once per rule and mode of a decision, however many messages.
	seen := make(map[[2]string]bool, len(d.Violations))
	for _, v := range slices.Concat(d.Violations, d.Warnings, d.DryRun) {
		mode := v.Mode
		if mode == "" {
			mode = policies.ModeDeny
		}
		key := [2]string{v.Rule, mode}
		if !seen[key] {
			seen[key] = true
			m.violations.WithLabelValues(ep, key[0], key[1], result).Inc()
		}
	}
}

// ObservePolicyReload counts one reload of the policy bundle (cause
// "signal" or "file") and its time; refused says the old bundle kept
// serving.
func (s *Server) ObservePolicyReload(cause string, took time.Duration, refused bool) {
	result := "applied"
	if refused {
		result = "refused"
	}
	if cause != "signal" && cause != "file" {
		cause = "other"
	}
	s.metrics.reloads.WithLabelValues(cause, result).Inc()
	s.metrics.reloadTime.Observe(took.Seconds())
	if !refused { // the new bundle's rules get their violation series
		s.metrics.initSeries(s.cfg.Engine.Rules())
	}
}

// ObserveNomad is the nomad.Config.Observe hook: latency and errors per call.
func (s *Server) ObserveNomad(op string, d time.Duration, err error) {
	s.metrics.nomadTime.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		s.metrics.nomadErrors.WithLabelValues(op).Inc()
	}
}

// observeRequests records every request's latency by route template.
func (s *Server) observeRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = fromError(err).Status
		}
		s.metrics.requests.WithLabelValues(s.metrics.methodLabel(c.Request().Method), s.metrics.routeLabel(c.Path()),
			strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		return err
	}
}

// stateCollector reports sandboxes by state from the store at scrape time.
type stateCollector struct{ st store.Store }

var sandboxesDesc = prometheus.NewDesc("sandgate_sandboxes", "Sandbox records by state.", []string{"state"}, nil)

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxesDesc }

// Collect implements prometheus.Collector: the store's per-state counters,
// kept in the same transactions as the records, so a scrape costs the same
// whatever the history.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.st.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		return
	}
	for _, st := range store.States() {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// initRateLimited creates the rate_limited series of every class of a new
// limit table, so each is 0 before its first refusal.
func (m *metrics) initRateLimited(t *limitTable) {
	for class := range t.limits {
		m.rateLimited.WithLabelValues(class)
	}
}

func (m *metrics) countRateLimited(class string) { m.rateLimited.WithLabelValues(class).Inc() }

// registerLease adds the background lease's gauges: whether this replica
// holds it (1) or not (0), and its epoch as this replica last saw it.
// Summed over the replicas, the first is 1 while the deployment is well.
func (m *metrics) registerLease(b *backgroundLease) error {
	labels := prometheus.Labels{"replica": b.replica}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sandgate_background_lease_held", ConstLabels: labels,
		Help: "1 while this replica holds the background lease and runs the reaper, reconcile and the usage monitor; 0 otherwise.",
	}, func() float64 {
		if b.status().Held {
			return 1
		}
		return 0
	})
	epoch := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sandgate_background_lease_epoch", ConstLabels: labels,
		Help: "The background lease's epoch as this replica last saw it; it grows by one whenever the lease changes hands.",
	}, func() float64 { return float64(b.status().Epoch) })
	for _, c := range []prometheus.Collector{held, epoch} {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
