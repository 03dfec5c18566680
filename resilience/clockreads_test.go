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
func clockReads(t *testing.T, cfg engineSpec, p Policy, ticking bool) int64 {
	t.Helper()
	cc := &countingClock{Clock: fakeclock.New(time.Unix(1_000_000, 0))}
	cfg.Clock = cc
	e := newEngine(cfg)
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
	budget := engineSpec{BudgetRatio: DefaultBudgetRatio, BudgetReserve: DefaultBudgetReserve}
	armed := budget
	armed.Breaker = &BreakerConfig{}
	armed.Adaptive = &AdaptiveHedging{MaxExtraLoad: 0.05}
	armed.Limit = &ConcurrencyLimit{}
	hooked := budget
	hooked.Hooks = Hooks{
		OnCallStart:  func(ctx context.Context, _ CallStartEvent) context.Context { return ctx },
		OnCallEnd:    func(CallEndEvent) {},
		OnAttemptEnd: func(AttemptEndEvent) {},
	}
	cases := []struct {
		name    string
		cfg     engineSpec
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
		{"armed", armed, Policy{MaxAttempts: 3, MaxHedges: 1, PerAttemptTimeout: 5 * time.Second}, true, 2},
		{"armed/fake", armed, Policy{MaxAttempts: 3, MaxHedges: 1, PerAttemptTimeout: 5 * time.Second}, false, 2},
		// The hooks' events (telemetry's): the call's start (its
		// admission's time too), the attempt's start and its end (the
		// call's end too: the call ends with the attempt it returns).
		{"hooks", hooked, Policy{MaxAttempts: 3}, true, 3},
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

// TestClockReadsOfARetry pins how often a call whose first attempt fails
// and whose retry, after a backoff of half a second, succeeds reads the clock,
// under a deadline, with the defaults (the budget alone): the first
// attempt's end (the deadline's comparison, which the budget's second and
// the start of the delay share), the sleep's start (what retaining the
// failed result took counts against the delay) and its end (how long it
// slept; the retry's admission). The budget's other seconds are coarse.
func TestClockReadsOfARetry(t *testing.T) {
	for _, ticking := range []bool{true, false} {
		t.Run(map[bool]string{true: "ticking", false: "fake"}[ticking], func(t *testing.T) {
			cc := &countingClock{Clock: fakeclock.New(time.Unix(1_000_000, 0))}
			e := newEngine(engineSpec{BudgetRatio: DefaultBudgetRatio, BudgetReserve: DefaultBudgetReserve, Clock: cc})
			if ticking {
				e.seconds = clock.NewSeconds(cc)
				e.seconds.Unix() // started: the refresh's own reads are not the call's
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // (the fake clock's time is long before it)
			defer cancel()
			armed := cc.Armed()
			cc.reads.Store(0)
			done := runAsync(ctx, e, Call[int]{Op: &scripted{steps: []step{{v: 503, retryable: true}, {v: 200}}},
				Policy: Policy{MaxAttempts: 2, Backoff: Constant(500 * time.Millisecond)}})
			if !cc.WaitForArmed(armed+1, 5*time.Second) {
				t.Fatal("the backoff never started")
			}
			cc.Advance(500 * time.Millisecond) // within the second: the refresh does not run
			res := <-done
			if res.Err != nil || res.Value != 200 || res.Attempt != 2 {
				t.Fatalf("call = %+v, want the retry's 200", res)
			}
			// On a fake clock the deposit's second (the launch) and the
			// success's (the retry's end) are reads too.
			want := map[bool]int64{true: 3, false: 5}[ticking]
			if got := cc.reads.Load(); got > want {
				t.Errorf("the call read the clock %d times, want at most %d", got, want)
			}
			t.Logf("%d clock reads", cc.reads.Load())
		})
	}
}

// BenchmarkEngineSuccess measures one successful call on the real clock:
// with the defaults (the budget alone), and armed with a breaker, adaptive
// hedging, a concurrency limit and a per-attempt timeout, where the reads
// of the clock that TestClockReadsOfASuccessfulCall counts are a visible
// share of the call.
func BenchmarkEngineSuccess(b *testing.B) {
	budget := engineSpec{BudgetRatio: DefaultBudgetRatio, BudgetReserve: DefaultBudgetReserve}
	armed := budget
	armed.Breaker = &BreakerConfig{}
	armed.Adaptive = &AdaptiveHedging{MaxExtraLoad: 0.05}
	armed.Limit = &ConcurrencyLimit{}
	cases := []struct {
		name string
		cfg  engineSpec
		p    Policy
	}{
		{"defaults", budget, Policy{MaxAttempts: 3}},
		{"armed", armed, Policy{MaxAttempts: 3, MaxHedges: 1, PerAttemptTimeout: 5 * time.Second}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := newEngine(c.cfg)
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

// TestReserveRefillsOnTheTickingSecond: the engine on the coarse second
// production runs (a timer of the clock refreshes it; see clock.Seconds),
// driven by a fake clock: the reserve refills once in a second, whatever
// the successes, and again once the refresh has published the next
// second.
func TestReserveRefillsOnTheTickingSecond(t *testing.T) {
	fc := fakeclock.New(t0.Add(500 * time.Millisecond))
	e := newTestEngine(fc, nil, engineSpec{BudgetReserve: 1})
	e.seconds = clock.NewSeconds(fc)
	fail := step{v: 503, retryable: true}
	attempts := func(steps ...step) int {
		op := &scripted{steps: steps}
		Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 2}})
		return op.Calls()
	}
	if n := attempts(fail, step{v: 200}); n != 2 { // the retry spends the reserve; its success refunds it
		t.Fatalf("%d attempts with a full reserve, want 2", n)
	}
	if n := attempts(fail); n != 2 { // a retry that fails keeps the reserve's retry
		t.Fatalf("%d attempts after a retry succeeded, want 2", n)
	}
	attempts(step{v: 200}) // a success: the second's one refill
	if n := attempts(fail); n != 2 {
		t.Fatalf("%d attempts after the second's first refill, want 2", n)
	}
	attempts(step{v: 200}) // a success in the same second: no second refill
	if n := attempts(fail); n != 1 {
		t.Fatalf("%d attempts after a second success in the same second, want 1", n)
	}
	if !e.seconds.Ticking() {
		t.Fatal("the engine's reads did not start the refresh")
	}
	fc.Advance(500 * time.Millisecond) // the next second: the refresh publishes it
	deadline := time.Now().Add(10 * time.Second)
	for e.seconds.Unix() != t0.Unix()+1 { // the refresh runs on its own goroutine
		if time.Now().After(deadline) {
			t.Fatalf("the coarse second stayed %d", e.seconds.Unix())
		}
		time.Sleep(time.Millisecond)
	}
	attempts(step{v: 200})
	if n := attempts(fail); n != 2 {
		t.Fatalf("%d attempts after a success in the next second, want 2", n)
	}
}
