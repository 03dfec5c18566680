package resilience

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// The tests of issue #29's admission defects: a hook that panics anywhere
// an admission is held must reach the caller's goroutine and leave nothing
// taken behind.

// panicky returns hooks whose named hook, once armed, signals hit and
// panics with "hook".
type panicky struct {
	once sync.Once
	hit  chan struct{}
}

func newPanicky() *panicky { return &panicky{hit: make(chan struct{})} }

func (p *panicky) fire() {
	p.once.Do(func() { close(p.hit) })
	panic("hook")
}

// callRecovering runs Execute on a goroutine of its own and returns what
// its caller saw: the result, or the value it panicked with.
func callRecovering(ctx context.Context, e *Engine, c Call[int]) <-chan any {
	out := make(chan any, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				out <- p
			}
		}()
		out <- Execute(ctx, e, c)
	}()
	return out
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

func recv(t *testing.T, ch <-chan any) any {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("the call never returned")
		return nil
	}
}

// inFlightOf returns the concurrency limit's in-flight count for key.
func inFlightOf(e *Engine, key string) int {
	h, _ := e.Stats().Host(key)
	return h.InFlight
}

// A hook that panics while the hedge timer's goroutine admits a hedge (the
// limit or the budget refuses it) used to panic on that goroutine, where
// nothing recovered it, and kill the process. The panic now reaches the
// caller of Execute, once its own attempt returns.
func TestHedgeAdmissionPanicReachesTheCaller(t *testing.T) {
	tests := []struct {
		name  string
		cfg   engineSpec
		hooks func(p *panicky) Hooks
	}{
		{"OnShed (the limit refuses the hedge)",
			engineSpec{Limit: &ConcurrencyLimit{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: -1}},
			func(p *panicky) Hooks { return Hooks{OnShed: func(ShedEvent) { p.fire() }} }},
		{"OnBudgetExhausted (the budget refuses the hedge)",
			engineSpec{BudgetRatio: 0.01, Limit: &ConcurrencyLimit{InitialLimit: 5}},
			func(p *panicky) Hooks { return Hooks{OnBudgetExhausted: func(BudgetEvent) { p.fire() }} }},
		{"OnBreakerReject (the breaker refuses the hedge)",
			engineSpec{Breaker: &BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}, Limit: &ConcurrencyLimit{InitialLimit: 5}},
			func(p *panicky) Hooks { return Hooks{OnBreakerReject: func(BreakerRejectEvent) { p.fire() }} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(t0)
			p := newPanicky()
			cfg := tc.cfg
			cfg.Hooks = tc.hooks(p)
			e := newTestEngine(fc, nil, cfg)
			gate := make(chan struct{})
			op := &scripted{steps: []step{{gate: gate, v: 200}, {v: 200}}}
			armed := fc.Armed()
			out := callRecovering(context.Background(), e, Call[int]{Key: "k", Op: promptly[int](op, true),
				Policy: Policy{MaxAttempts: 2, MaxHedges: 1, HedgeDelay: 10 * time.Millisecond}})
			if !fc.WaitForArmed(armed+1, 5*time.Second) {
				t.Fatal("hedge timer never armed")
			}
			if cfg.Breaker != nil {
				// Another call's failure opens the breaker: the hedge is rejected.
				fail := &scripted{steps: []step{{v: 503, retryable: true}}}
				Execute(context.Background(), e, Call[int]{Key: "k", Op: fail, Policy: Policy{MaxAttempts: 1}})
			}
			fc.Advance(10 * time.Millisecond)
			waitFor(t, p.hit, "the hook")
			close(gate)
			if got := recv(t, out); got != "hook" {
				t.Fatalf("the caller saw %v, want the hook's panic", got)
			}
			if n := inFlightOf(e, "k"); n != 0 {
				t.Errorf("in flight after the call: %d, want 0 (a permit was lost)", n)
			}
		})
	}
}

// A hook that panics after a permit was taken and before an attempt holds
// it used to leave the limit one permit smaller for good.
func TestHookPanicKeepsNoPermit(t *testing.T) {
	hedging := Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: 10 * time.Millisecond}
	tests := []struct {
		name  string
		hooks func(p *panicky) Hooks
		// steps of the panicking call; gate is its first attempt's gate.
		steps func(gate chan struct{}) []step
		// waiter: the call first waits for a permit another call holds.
		waiter bool
		hedge  bool
	}{
		{name: "OnLimitWait (a first attempt waited for its permit)", waiter: true,
			hooks: func(p *panicky) Hooks { return Hooks{OnLimitWait: func(LimitWaitEvent) { p.fire() }} },
			steps: func(chan struct{}) []step { return []step{{v: 200}} }},
		{name: "OnHedge (between a hedge's admission and its launch)", hedge: true,
			hooks: func(p *panicky) Hooks { return Hooks{OnHedge: func(HedgeEvent) { p.fire() }} },
			steps: func(g chan struct{}) []step { return []step{{gate: g}, {v: 200}} }},
		{name: "OnRetry (a retry launched at once beside a hedge)", hedge: true,
			hooks: func(p *panicky) Hooks { return Hooks{OnRetry: func(RetryEvent) { p.fire() }} },
			steps: func(g chan struct{}) []step { return []step{{gate: g}, {v: 503, retryable: true}, {v: 200}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(t0)
			p := newPanicky()
			limit := 5
			if tc.waiter {
				limit = 1
			}
			e := newTestEngine(fc, nil, engineSpec{Hooks: tc.hooks(p),
				Limit: &ConcurrencyLimit{InitialLimit: limit, MinLimit: limit, MaxLimit: limit, MaxWait: time.Hour}})
			var holder <-chan Result[int]
			holderGate := make(chan struct{})
			if tc.waiter {
				hold := &scripted{steps: []step{{gate: holderGate, v: 200}}}
				holder = runAsync(context.Background(), e, Call[int]{Key: "k", Op: hold, Policy: Policy{MaxAttempts: 1}})
				for inFlightOf(e, "k") != 1 {
					time.Sleep(time.Millisecond)
				}
			}
			gate := make(chan struct{})
			op := &scripted{steps: tc.steps(gate)}
			pol := Policy{MaxAttempts: 1}
			if tc.hedge {
				pol = hedging
			}
			armed := fc.Armed()
			out := callRecovering(context.Background(), e, Call[int]{Key: "k", Op: promptly[int](op, true), Policy: pol})
			if tc.waiter {
				if !fc.WaitForArmed(armed+1, 5*time.Second) { // the wait's timer
					t.Fatal("the call never waited")
				}
				fc.Advance(time.Millisecond) // OnLimitWait reports a wait that took time
				close(holderGate)
				<-holder
			}
			if tc.hedge {
				if !fc.WaitForArmed(armed+1, 5*time.Second) {
					t.Fatal("hedge timer never armed")
				}
				fc.Advance(10 * time.Millisecond)
			}
			waitFor(t, p.hit, "the hook")
			close(gate)
			if got := recv(t, out); got != "hook" {
				t.Fatalf("the caller saw %v, want the hook's panic", got)
			}
			deadline := time.Now().Add(10 * time.Second)
			for inFlightOf(e, "k") != 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // a cancelled attempt returns its own permit as it ends
			}
			if n := inFlightOf(e, "k"); n != 0 {
				t.Fatalf("in flight after the panic: %d, want 0 (a permit was lost for good)", n)
			}
		})
	}
}
