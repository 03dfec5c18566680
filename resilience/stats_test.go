package resilience

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// Stats merges what the breakers and adaptive hedging know into one entry
// per key, sorted, with the breaker's time in its state by the engine's
// clock.
func TestStatsOneEntryPerKey(t *testing.T) {
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{
		BudgetRatio: 0.5, BudgetReserve: 0,
		Breaker:  &BreakerConfig{FailureThreshold: 1, OpenDuration: time.Minute},
		Adaptive: &AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 200 * time.Millisecond},
	})
	fail := &scripted{steps: []step{{v: 503, retryable: true}}}
	ok := &scripted{steps: []step{{v: 200}}}
	Execute(context.Background(), e, Call[int]{Key: "b", Op: ok, Policy: Policy{MaxAttempts: 1, MaxHedges: 1}})
	Execute(context.Background(), e, Call[int]{Key: "a", Op: fail, Policy: Policy{MaxAttempts: 1, HedgeDelay: Off}})
	fc.Advance(3 * time.Second)

	st := e.Stats()
	if !st.Breakers || st.MaxExtraLoad != 0.05 || st.UntrackedAdmissions != 0 {
		t.Errorf("Stats = %+v, want Breakers, MaxExtraLoad 0.05, no untracked admissions", st)
	}
	if st.BudgetTokens != 0.5 {
		t.Errorf("BudgetTokens = %v, want 0.5 (two calls at ratio 0.5, the 503 taking its deposit back)", st.BudgetTokens)
	}
	if len(st.Hosts) != 2 || st.Hosts[0].Key != "a" || st.Hosts[1].Key != "b" {
		t.Fatalf("Hosts = %+v, want a then b", st.Hosts)
	}
	a, b := st.Hosts[0], st.Hosts[1]
	if a.Breaker != BreakerOpen || a.BreakerFor != 3*time.Second {
		t.Errorf("a: %v for %v, want open for 3s", a.Breaker, a.BreakerFor)
	}
	if a.HedgeDelay != 0 || a.HedgeWarm {
		t.Errorf("a: hedge delay %v warm %v, want none (no adaptive call)", a.HedgeDelay, a.HedgeWarm)
	}
	if b.Breaker != BreakerClosed || b.HedgeDelay != 200*time.Millisecond || b.HedgeWarm {
		t.Errorf("b: %+v, want closed, cold delay MaxDelay", b)
	}
	if h, found := st.Host("a"); !found || h != a {
		t.Errorf("Host(a) = %+v, %v", h, found)
	}
	if _, found := st.Host("c"); found {
		t.Error("Host(c) found an untracked key")
	}
}

// Without a budget, breakers or adaptive hedging, Stats says so and lists
// no key.
func TestStatsEmpty(t *testing.T) {
	e := newTestEngine(fakeclock.New(t0), nil, engineSpec{})
	Execute(context.Background(), e, Call[int]{Key: "a", Op: &scripted{steps: []step{{v: 200}}}, Policy: Policy{MaxAttempts: 1}})
	st := e.Stats()
	if !math.IsInf(st.BudgetTokens, 1) || st.Breakers || st.MaxExtraLoad != 0 || len(st.Hosts) != 0 {
		t.Errorf("Stats = %+v, want +Inf tokens and nothing tracked", st)
	}
}
