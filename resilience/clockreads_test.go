package resilience

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// countingClock is a fake clock that counts its Now calls: the reads of
// the exact time the engine makes.
type countingClock struct {
	*fakeclock.Clock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.Clock.Now()
}

// okOp is an Operation whose every attempt succeeds at once, and that
// cancels promptly (so a hedging call runs its attempt inline).
type okOp struct{}

func (okOp) Prepare(n int) (int, EndReason, error)        { return n, 0, nil }
func (okOp) Do(context.Context, AttemptInfo) (int, error) { return 200, nil }
func (okOp) Classify(v int, err error, _ AttemptInfo) Verdict {
	return Verdict{Code: v}
}
func (okOp) Retain(_ context.Context, v int) int { return v }
func (okOp) Release(int)                         {}
func (okOp) CancelsPromptly()                    {}

// clockReads returns how many times one successful call on an engine built
// from cfg reads the clock, after a first call has found (and added) the
// key. With ticking set the engine's coarse second is the one production
// runs (a timer refreshes it; see clock.Seconds), else the one a fake clock
// gets (clock.SecondsOf: a read of the clock per coarse read).
func clockReads(t *testing.T, cfg EngineConfig, p Policy, ticking bool) int64 {
	t.Helper()
	cc := &countingClock{Clock: fakeclock.New(time.Unix(1_000_000, 0))}
	cfg.Clock = cc
	e := NewEngine(cfg)
	if ticking {
		e.seconds = clock.NewSeconds(cc)
	}
	call := func() {
		res := Execute(context.Background(), e, Call[int]{Key: "api.internal", Policy: p, Op: okOp{}})
		if res.Err != nil || res.Value != 200 {
			t.Fatalf("call = %v, %v; want 200", res.Value, res.Err)
		}
		res.Finish(nil)
	}
	call()
	cc.reads.Store(0)
	call()
	return cc.reads.Load()
}

// TestClockReadsOfASuccessfulCall pins how often a successful call reads
// the clock, as upper bounds. A read costs tens of nanoseconds on the
// virtual machines we measure on (see clock.Seconds), as much as the rest
// of a plain call; and each decision reading the clock once is what makes
// every comparison within it agree.
func TestClockReadsOfASuccessfulCall(t *testing.T) {
	budget := EngineConfig{BudgetRatio: DefaultBudgetRatio, BudgetReserve: DefaultBudgetReserve}
	armed := budget
	armed.Breaker = &BreakerConfig{}
	armed.Adaptive = &AdaptiveHedging{MaxExtraLoad: 0.05}
	armed.Limit = &ConcurrencyLimit{}
	cases := []struct {
		name    string
		cfg     EngineConfig
		p       Policy
		ticking bool
		max     int64
	}{
		// Production, defaults: the budget's deposit and its success
		// take the coarse second, an atomic load: no read at all.
		{"defaults", budget, Policy{MaxAttempts: 3}, true, 0},
		// On a fake clock the coarse second is a read of the clock: one
		// for the call's admission (the deposit), one for the attempt's
		// end (the success).
		{"defaults/fake", budget, Policy{MaxAttempts: 3}, false, 2},
		// Breaker, adaptive hedging, concurrency limit and a per-attempt
		// timeout: the attempt's start (the hedge delay learned for the
		// key is read at it, and the limit and adaptive hedging time the
		// attempt from it) and its end (the latency the limit and
		// adaptive hedging learn; the breaker's and budget's second). A
		// closed breaker and a tracked key want no time at all.
		{"armed", armed, Policy{MaxAttempts: 3, MaxHedges: 1, Adaptive: true, PerAttemptTimeout: 5 * time.Second}, true, 2},
		{"armed/fake", armed, Policy{MaxAttempts: 3, MaxHedges: 1, Adaptive: true, PerAttemptTimeout: 5 * time.Second}, false, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := clockReads(t, c.cfg, c.p, c.ticking)
			t.Logf("%s: %d clock reads", c.name, got)
			if got > c.max {
				t.Errorf("a successful call read the clock %d times, want at most %d", got, c.max)
			}
		})
	}
}

// BenchmarkEngineSuccess measures one successful call on the real clock:
// with the defaults (the budget alone), and armed with a breaker, adaptive
// hedging, a concurrency limit and a per-attempt timeout, where the reads
// of the clock that TestClockReadsOfASuccessfulCall counts are a visible
// share of the call.
func BenchmarkEngineSuccess(b *testing.B) {
	budget := EngineConfig{BudgetRatio: DefaultBudgetRatio, BudgetReserve: DefaultBudgetReserve}
	armed := budget
	armed.Breaker = &BreakerConfig{}
	armed.Adaptive = &AdaptiveHedging{MaxExtraLoad: 0.05}
	armed.Limit = &ConcurrencyLimit{}
	cases := []struct {
		name string
		cfg  EngineConfig
		p    Policy
	}{
		{"defaults", budget, Policy{MaxAttempts: 3}},
		{"armed", armed, Policy{MaxAttempts: 3, MaxHedges: 1, Adaptive: true, PerAttemptTimeout: 5 * time.Second}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := NewEngine(c.cfg)
			ctx := context.Background()
			call := Call[int]{Key: "api.internal", Policy: c.p, Op: okOp{}}
			b.ReportAllocs()
			for b.Loop() {
				res := Execute(ctx, e, call)
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				res.Finish(nil)
			}
		})
	}
}
