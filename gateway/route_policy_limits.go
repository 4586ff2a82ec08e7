package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"sandgate/gateway/replay"
	"sandgate/gateway/wire"
)

// PolicyLimits bound the policy routes, so that no dry run and no
// candidate bundle can take the gateway's memory or CPU from the agents it
// serves (docs/threat-model.md, docs/runbook.md "policy.evaluate" and
// "policy.replay"). Zero fields take the defaults below.
type PolicyLimits struct {
	// EvaluateTimeout is how long one dry run (POST /v1/policy/evaluate)
	// may evaluate; past it the answer is 422 evaluation_deadline_exceeded.
	// Default 2 s.
	EvaluateTimeout time.Duration
	// EvaluateMaxBytes bounds a dry run's body; past it the answer is 413
	// payload_too_large. Default 256 KiB.
	EvaluateMaxBytes int64
	// EvaluateConcurrency is how many dry runs evaluate at once; one more
	// is answered 429 policy_busy with Retry-After. Default 2.
	EvaluateConcurrency int
	// ReplayTimeout is how long a replay (POST /v1/policy/replay) may run
	// before its worker is killed (422 candidate_exceeded_limits,
	// wall_clock). Default 60 s.
	ReplayTimeout time.Duration
	// ReplayMaxBytes bounds a candidate bundle's body (413). Default 4 MiB.
	ReplayMaxBytes int64
	// ReplayConcurrency is how many replays run at once (429 policy_busy
	// past it). Default 1.
	ReplayConcurrency int
	// ReplayMemoryBytes is a replay worker's RLIMIT_DATA (422
	// candidate_exceeded_limits, memory). Default 1 GiB.
	ReplayMemoryBytes int64
	// ReplayCPU is a replay worker's RLIMIT_CPU, in whole seconds (422
	// candidate_exceeded_limits, cpu_time). Default 60 s.
	ReplayCPU time.Duration
	// ReplayWorker starts a replay worker: the sandgate binary with
	// replay.WorkerArgs (cmd/sandgate sets it). Empty: replay answers 503,
	// a candidate never runs in the gateway's own process.
	ReplayWorker replay.Command
}

// Defaults of PolicyLimits.
const (
	DefaultEvaluateTimeout     = 2 * time.Second
	DefaultEvaluateMaxBytes    = 256 << 10
	DefaultEvaluateConcurrency = 2
	DefaultReplayTimeout       = 60 * time.Second
	DefaultReplayMaxBytes      = 4 << 20
	DefaultReplayConcurrency   = 1
	DefaultReplayMemoryBytes   = 1 << 30
	DefaultReplayCPU           = 60 * time.Second
)

func (l *PolicyLimits) defaults() {
	setDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	setDur(&l.EvaluateTimeout, DefaultEvaluateTimeout)
	setDur(&l.ReplayTimeout, DefaultReplayTimeout)
	setDur(&l.ReplayCPU, DefaultReplayCPU)
	if l.EvaluateMaxBytes == 0 {
		l.EvaluateMaxBytes = DefaultEvaluateMaxBytes
	}
	if l.EvaluateConcurrency == 0 {
		l.EvaluateConcurrency = DefaultEvaluateConcurrency
	}
	if l.ReplayMaxBytes == 0 {
		l.ReplayMaxBytes = DefaultReplayMaxBytes
	}
	if l.ReplayConcurrency == 0 {
		l.ReplayConcurrency = DefaultReplayConcurrency
	}
	if l.ReplayMemoryBytes == 0 {
		l.ReplayMemoryBytes = DefaultReplayMemoryBytes
	}
}

func (l *PolicyLimits) validate() error {
	if err := l.Check(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// Check reports the first limit that cannot work, by its configuration
// key; zero fields are their defaults and pass.
func (l PolicyLimits) Check() error {
	l.defaults()
	for key, d := range map[string]time.Duration{keyEvaluateTimeout: l.EvaluateTimeout, keyReplayTimeout: l.ReplayTimeout, keyReplayCPU: l.ReplayCPU} {
		if d < 0 {
			return fmt.Errorf("%s %s is negative", key, d)
		}
	}
	for key, n := range map[string]int64{keyEvaluateMaxBytes: l.EvaluateMaxBytes, keyReplayMaxBytes: l.ReplayMaxBytes} {
		if n < 1024 {
			return fmt.Errorf("%s %d is below 1 KiB", key, n)
		}
	}
	for key, n := range map[string]int{keyEvaluateConc: l.EvaluateConcurrency, keyReplayConc: l.ReplayConcurrency} {
		if n < 1 {
			return fmt.Errorf("%s %d is below 1", key, n)
		}
	}
	// A worker of the shipped bundle needs about 140 MiB of RLIMIT_DATA
	// to load it (its Go runtime's mappings count, not only its heap).
	if l.ReplayMemoryBytes < 256<<20 {
		return fmt.Errorf("%s %d is below 256 MiB, too little for a worker to load a bundle", keyReplayMemory, l.ReplayMemoryBytes)
	}
	return nil
}

// The configuration keys of the limits (cmd/sandgate's serve config,
// docs/runbook.md), named by the problems they refuse with.
const (
	keyEvaluateTimeout  = "policy.evaluate.timeout"
	keyEvaluateMaxBytes = "policy.evaluate.max_bytes"
	keyEvaluateConc     = "policy.evaluate.concurrency"
	keyReplayTimeout    = "policy.replay.timeout"
	keyReplayMaxBytes   = "policy.replay.max_bytes"
	keyReplayConc       = "policy.replay.concurrency"
	keyReplayMemory     = "policy.replay.memory_bytes"
	keyReplayCPU        = "policy.replay.cpu_time"
)

// semaphore holds one token per running request of a kind.
type semaphore chan struct{}

// tryAcquire takes a token if one is free; release gives it back.
func (s semaphore) tryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s semaphore) release() { <-s }

// policyBusy is the 429 of a policy route at its concurrency limit.
func policyBusy(what, key string, limit, retryAfter int) *Problem {
	p := newProblem(http.StatusTooManyRequests, wire.CodePolicyBusy,
		fmt.Sprintf("%d %s already running, as many as %s allows; retry after %d s", limit, what, key, retryAfter))
	p.Limit = key
	p.RetryAfter = time.Duration(retryAfter) * time.Second
	return p
}

// tooLarge is the 413 of a body past a configured bound.
func tooLarge(what, key string, limit int64) *Problem {
	p := newProblem(http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
		what+" is larger than "+strconv.FormatInt(limit, 10)+" bytes ("+key+"); nothing was evaluated")
	p.Field, p.Limit = "body", key
	return p
}
