package resilience

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// What one attempt of chaosOp does.
const (
	actOK        = iota // answers at once, not retryable
	actRetryable        // answers at once, retryable (a 503)
	actFatal            // fails at once, not retryable
	actSlow             // answers after a millisecond
	actBlock            // waits for its context (a timeout, a lost hedge, the caller's end)
	actPanic            // Do panics
	numActs
)

// chaosOp plays one drawn action per attempt number.
type chaosOp struct {
	acts []int
}

var errChaos = errors.New("chaos")

func (o *chaosOp) Prepare(n int) (int, EndReason, error) { return n, 0, nil }

func (o *chaosOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	switch o.acts[min(a.Number, len(o.acts))-1] {
	case actRetryable:
		return 503, nil
	case actFatal:
		return 0, errChaos
	case actSlow:
		select {
		case <-time.After(time.Millisecond):
			return 200, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	case actBlock:
		<-ctx.Done()
		return 0, ctx.Err()
	case actPanic:
		panic("do")
	}
	return 200, nil
}

func (o *chaosOp) Classify(v int, err error, _ AttemptInfo) Verdict {
	switch {
	case errors.Is(err, ErrAttemptTimeout):
		return Verdict{Retryable: true, Overload: true}
	case err != nil:
		return Verdict{}
	}
	return Verdict{Retryable: v == 503, Code: v, Overload: v == 503}
}

func (o *chaosOp) Retain(_ context.Context, v int) int { return v }
func (o *chaosOp) Release(int)                         {}

// panicHooks returns hooks that panic on every every-th firing of the hook
// named name ("" for none).
func panicHooks(name string, every int) Hooks {
	var n atomic.Int64
	boom := func() {
		if n.Add(1)%int64(every) == 0 {
			panic("hook " + name)
		}
	}
	switch name {
	case "OnCallStart":
		return Hooks{OnCallStart: func(ctx context.Context, _ CallStartEvent) context.Context { boom(); return ctx }}
	case "OnAttemptStart":
		return Hooks{OnAttemptStart: func(ctx context.Context, _ AttemptStartEvent) context.Context { boom(); return ctx }}
	case "OnAttemptEnd":
		return Hooks{OnAttemptEnd: func(AttemptEndEvent) { boom() }}
	case "OnRetry":
		return Hooks{OnRetry: func(RetryEvent) { boom() }}
	case "OnBackoff":
		return Hooks{OnBackoff: func(BackoffEvent) { boom() }}
	case "OnHedge":
		return Hooks{OnHedge: func(HedgeEvent) { boom() }}
	case "OnBudgetExhausted":
		return Hooks{OnBudgetExhausted: func(BudgetEvent) { boom() }}
	case "OnBreakerReject":
		return Hooks{OnBreakerReject: func(BreakerRejectEvent) { boom() }}
	case "OnBreakerStateChange":
		return Hooks{OnBreakerStateChange: func(BreakerStateEvent) { boom() }}
	case "OnShed":
		return Hooks{OnShed: func(ShedEvent) { boom() }}
	case "OnLimitWait":
		return Hooks{OnLimitWait: func(LimitWaitEvent) { boom() }}
	case "OnCallEnd":
		return Hooks{OnCallEnd: func(CallEndEvent) { boom() }}
	}
	return Hooks{}
}

var hookNames = []string{"", "OnCallStart", "OnAttemptStart", "OnAttemptEnd", "OnRetry", "OnBackoff", "OnHedge",
	"OnBudgetExhausted", "OnBreakerReject", "OnBreakerStateChange", "OnShed", "OnLimitWait", "OnCallEnd"}

// budgetHeld returns the tokens the budget counts as taken in now's window
// and not refunded. The test's budgets have no reserve (its refills by
// successes would blur the count), so every token is paid from deposits;
// giving one back is the same Refund either way.
func budgetHeld(b *retryBudget, now time.Time) int64 {
	return sum(&b.spent, epochOf(now), budgetBuckets)
}

// TestAdmissionsAlwaysReturn is issue #29's property: whatever mix of
// successes, failures, timeouts, cancellations, hedges, refusals (budget,
// breaker, limit) and panics (in Do or in any hook) a set of concurrent
// calls meets, once they have returned and their late attempts ended, the
// concurrency limit has no permit out, no breaker counts a probe in
// flight, and the budget has spent exactly one token per retry or hedge
// that launched: nothing taken was lost, nothing given back twice.
func TestAdmissionsAlwaysReturn(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		panicIn := rapid.SampledFrom(hookNames).Draw(rt, "panicIn")
		every := rapid.IntRange(1, 3).Draw(rt, "every")
		var extra atomic.Int64 // retries and hedges launched, less those that succeeded (refunded)
		count := Hooks{OnAttemptStart: func(ctx context.Context, e AttemptStartEvent) context.Context {
			if e.Kind != KindInitial {
				extra.Add(1)
			}
			return ctx
		}, OnCallEnd: func(e CallEndEvent) {
			if e.Reason == ReasonSuccess && e.Err == nil && e.Returned > 1 {
				extra.Add(-1) // the retry or hedge that succeeded got its token back
			}
		}}
		limit := rapid.IntRange(1, 4).Draw(rt, "limit")
		e := newEngine(engineSpec{
			Hooks:       Combine(count, panicHooks(panicIn, every)),
			BudgetRatio: rapid.SampledFrom([]float64{0.01, 0.5, 2}).Draw(rt, "ratio"),
			Breaker: &BreakerConfig{FailureThreshold: rapid.IntRange(1, 3).Draw(rt, "threshold"),
				OpenDuration: time.Duration(rapid.IntRange(1, 3).Draw(rt, "openMs")) * time.Millisecond},
			Limit: &ConcurrencyLimit{InitialLimit: limit, MinLimit: 1, MaxLimit: 4,
				MaxWait: time.Duration(rapid.IntRange(-1, 2).Draw(rt, "waitMs")) * time.Millisecond},
		})
		keys := rapid.IntRange(1, 2).Draw(rt, "keys")
		n := rapid.IntRange(1, 6).Draw(rt, "calls")
		type call struct {
			c      Call[int]
			cancel time.Duration
		}
		calls := make([]call, n)
		for i := range calls {
			acts := rapid.SliceOfN(rapid.IntRange(0, numActs-1), 1, 4).Draw(rt, fmt.Sprintf("acts%d", i))
			var op Operation[int] = &chaosOp{acts: acts}
			if rapid.Bool().Draw(rt, fmt.Sprintf("prompt%d", i)) {
				op = promptOp[int]{op}
			}
			p := Policy{
				MaxAttempts: rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("attempts%d", i)),
				Backoff:     Constant(time.Duration(rapid.IntRange(0, 1000).Draw(rt, fmt.Sprintf("backoffUs%d", i))) * time.Microsecond),
			}
			if rapid.Bool().Draw(rt, fmt.Sprintf("hedge%d", i)) {
				p.MaxHedges = 1
				p.HedgeDelay = time.Duration(rapid.IntRange(100, 1500).Draw(rt, fmt.Sprintf("hedgeUs%d", i))) * time.Microsecond
			}
			if rapid.Bool().Draw(rt, fmt.Sprintf("timeout%d", i)) {
				p.PerAttemptTimeout = time.Duration(rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("timeoutMs%d", i))) * time.Millisecond
			}
			calls[i] = call{
				c:      Call[int]{Key: fmt.Sprintf("k%d", rapid.IntRange(1, keys).Draw(rt, fmt.Sprintf("key%d", i))), Op: op, Policy: p},
				cancel: time.Duration(rapid.IntRange(1, 20).Draw(rt, fmt.Sprintf("cancelMs%d", i))) * time.Millisecond,
			}
		}
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				defer func() { _ = recover() }() // a panic reaching the caller is the promise
				ctx, cancel := context.WithTimeout(context.Background(), c.cancel)
				defer cancel()
				res := Execute(ctx, e, c.c)
				res.Finish(nil)
			})
		}
		wg.Wait()

		// Late attempts (hedge losers, attempts of a call that ended) end
		// as their contexts are cancelled; give them time on a loaded
		// machine, then check.
		settled := func() error {
			var err error
			e.hosts.each(func(h *host) {
				h.br.mu.Lock()
				probes := h.br.probes
				h.br.mu.Unlock()
				switch {
				case err != nil:
				case h.lim.inFlight() != 0:
					err = fmt.Errorf("%s: %d permits out", h.key, h.lim.inFlight())
				case probes != 0:
					err = fmt.Errorf("%s: %d probes in flight", h.key, probes)
				}
			})
			if held, want := budgetHeld(e.budget, e.clock.Now()), extra.Load(); err == nil && held != want {
				err = fmt.Errorf("budget holds %d tokens taken, want %d (one per retry or hedge launched that did not succeed)", held, want)
			}
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for settled() != nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := settled(); err != nil {
			rt.Fatalf("after every call returned (hook panicking: %q every %d): %v", panicIn, every, err)
		}
	})
}
