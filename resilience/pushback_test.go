package resilience

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// Pushback (Verdict.Pushback: the retrying was done below) stops further
// attempts and hides nothing (issue #38).

var (
	pushedStep   = step{v: 503, retryable: true, pushback: true}
	pushed500    = step{v: 500, retryable: true, pushback: true}
	pushedThrot  = step{v: 429, retryable: true, throttle: true, pushback: true}
	pushedButOK  = step{v: 200, pushback: true} // not retryable: the pushback means nothing
	pushbackCall = Policy{MaxAttempts: 3}
)

// TestPushbackIsNoSuccessForTheBreaker: six calls answered with a
// retryable status and pushback open a breaker of threshold 3, as six
// failures do; a throttle with pushback is still a throttle, which the
// breaker ignores; and a pushback on an answer that is not retryable
// changes nothing.
func TestPushbackIsNoSuccessForTheBreaker(t *testing.T) {
	cases := []struct {
		name     string
		attempts int
		steps    []step
		want     BreakerState
	}{
		{"six 503s with pushback", 3, repeat(pushedStep, 6), BreakerOpen},
		{"six 500s with pushback", 3, repeat(pushed500, 6), BreakerOpen},
		{"two failures, a pushback", 1, []step{downStep, downStep, pushedStep}, BreakerOpen},
		{"six throttles with pushback", 3, repeat(pushedThrot, 6), BreakerClosed},
		{"two failures, a 200 with pushback, a failure", 1, []step{downStep, downStep, pushedButOK, downStep}, BreakerClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(fakeclock.New(t0), nil, engineSpec{Breaker: &BreakerConfig{FailureThreshold: 3, OpenDuration: time.Minute}})
			if got := breakerAfter(t, e, tc.attempts, tc.steps...); got != tc.want {
				t.Errorf("breaker %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPushbackIsNoSuccessForTheBudget: a 500 with pushback (retryable, no
// overload) neither refills the reserve nor deposits, as a success would:
// a client whose reserve was spent on a failing call has nothing after a
// second of such answers, and has a retry again after a second with a
// success.
func TestPushbackIsNoSuccessForTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		then step
		want float64
	}{
		{"a 500 with pushback", pushed500, 0},
		{"a success", fineStep, 1 + DefaultBudgetRatio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(t0)
			e := newTestEngine(fc, nil, engineSpec{BudgetRatio: DefaultBudgetRatio, BudgetReserve: 2})
			op := &scripted{steps: []step{downStep}}
			Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 3}})
			if got := e.Stats().BudgetTokens; got != 0 || op.Calls() != 3 {
				t.Fatalf("after a failing call of %d attempts the budget holds %v; want 3 attempts and 0", op.Calls(), got)
			}
			fc.Advance(time.Second)
			Execute(context.Background(), e, Call[int]{Op: &scripted{steps: []step{tc.then}}, Policy: Policy{MaxAttempts: 3}})
			if got := e.Stats().BudgetTokens; got != tc.want {
				t.Errorf("budget holds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPushbackEndsTheCallAfterItsAttempt: a retryable answer with
// pushback is not retried, and is returned with the reason pushback, on
// the plain path (no hooks) and the general one alike; the attempt's end
// event says it was pushed back.
func TestPushbackEndsTheCallAfterItsAttempt(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		t.Run(fmt.Sprintf("hooks=%v", hooked), func(t *testing.T) {
			op := &scripted{steps: []step{pushedStep, fineStep}}
			rec := &recorder{}
			cfg := engineSpec{}
			var pushed []bool
			if hooked {
				cfg.Hooks = Combine(rec.hooks(), Hooks{OnAttemptEnd: func(e AttemptEndEvent) { pushed = append(pushed, e.Pushback) }})
			}
			res := Execute(context.Background(), newEngine(cfg), Call[int]{Op: op, Policy: pushbackCall})
			if res.Err != nil || res.Value != 503 || op.Calls() != 1 {
				t.Fatalf("got %d, %v after %d attempts; want the 503 after 1", res.Value, res.Err, op.Calls())
			}
			if hooked && (rec.end.Reason != ReasonPushback || !slices.Equal(pushed, []bool{true})) {
				t.Errorf("end reason %v, attempt ends pushed back %v; want pushback, [true]", rec.end.Reason, pushed)
			}
		})
	}
}

// TestPushbackFromAHedgeDoesNotWin: a hedge answered with pushback while
// the first attempt is still running does not end the call: the call waits
// for the first attempt, which returns 200, and launches nothing more
// (MaxHedges 2 and MaxAttempts 3 would allow a third attempt), in both
// hedging modes.
func TestPushbackFromAHedgeDoesNotWin(t *testing.T) {
	for _, prompt := range []bool{false, true} {
		t.Run(fmt.Sprintf("prompt=%v", prompt), func(t *testing.T) {
			fc := fakeclock.New(t0)
			rec := &recorder{}
			e := newTestEngine(fc, rec, engineSpec{})
			gate := make(chan struct{})
			op := &scripted{steps: []step{{gate: gate, v: 200}, pushedStep, fineStep}}
			done := runAsync(context.Background(), e, Call[int]{Op: promptly[int](op, prompt),
				Policy: Policy{MaxAttempts: 3, MaxHedges: 2, HedgeDelay: time.Second}})
			waitArmedN(t, fc, 1)
			fc.Advance(time.Second) // the hedge launches, and is answered with pushback at once
			waitUntil(t, func() bool { return slices.Contains(rec.Events(), "attempt 2 hedge retryable") }, "the hedge's end")
			armed := fc.Armed()
			fc.Advance(10 * time.Second) // a hedge timer re-armed would fire now
			select {
			case res := <-done:
				t.Fatalf("the call ended with %+v while its first attempt was in flight", res)
			default:
			}
			close(gate)
			res := <-done
			if res.Err != nil || res.Value != 200 || res.Attempt != 1 {
				t.Fatalf("got %+v, want attempt 1's 200", res)
			}
			if op.Calls() != 2 || rec.end.Attempts != 2 || fc.Armed() != armed {
				t.Errorf("%d attempts (%d reported), %d timers armed after the pushback; want 2 and none: %q",
					op.Calls(), rec.end.Attempts, fc.Armed()-armed, rec.Events())
			}
		})
	}
}

// TestPushbackFromAHedgeThenAFailure: when the attempt the pushback waited
// for fails too, the call ends with it, with the reason pushback.
func TestPushbackFromAHedgeThenAFailure(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	gate := make(chan struct{})
	op := &scripted{steps: []step{{gate: gate, err: errBoom}, pushedStep, fineStep}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptOp[int]{op},
		Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second}})
	waitArmedN(t, fc, 1)
	fc.Advance(time.Second)
	waitUntil(t, func() bool { return slices.Contains(rec.Events(), "attempt 2 hedge retryable") }, "the hedge's end")
	close(gate) // attempt 1 fails: a gated step classifies its error as retryable
	res := <-done
	if res.Value != 503 || op.Calls() != 2 || rec.end.Reason != ReasonPushback {
		t.Errorf("got %+v after %d attempts, reason %v; want the hedge's 503 after 2 attempts, reason pushback", res, op.Calls(), rec.end.Reason)
	}
}

// deadlineCtx is a context whose deadline is on the fake clock: it never
// ends by itself, so the engine's own reading of the deadline is tested.
type deadlineCtx struct {
	context.Context
	dl time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }

// TestNoRetryStartsAtTheDeadline: a backoff sleep that would end at the
// deadline is not started, and one whose timer wakes after the deadline
// (the sleep was due half a second before it) launches nothing: either
// way the call ends with past_deadline after one attempt.
func TestNoRetryStartsAtTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // after t0; the backoff is 1s
		sleeps   bool
	}{
		{"the sleep would end at the deadline", time.Second, false},
		{"the sleep wakes after the deadline", 1500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(t0)
			rec := &recorder{}
			e := newTestEngine(fc, rec, engineSpec{})
			op := &scripted{steps: []step{downStep, fineStep}}
			ctx := deadlineCtx{context.Background(), t0.Add(tc.deadline)}
			done := runAsync(ctx, e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 3, Backoff: Constant(time.Second)}})
			if tc.sleeps {
				waitArmedN(t, fc, 1)
				fc.Advance(2 * time.Second) // the timer fires late: the clock reads t0+2s as the sleep ends
			}
			res := <-done
			if res.Value != 503 || op.Calls() != 1 || rec.end.Reason != ReasonPastDeadline || (fc.Armed() > 0) != tc.sleeps {
				t.Errorf("got %+v after %d attempts and %d sleeps, reason %v; want the 503 after 1, past_deadline", res, op.Calls(), fc.Armed(), rec.end.Reason)
			}
		})
	}
}

// TestNoAttemptStartsAfterTheDeadlineBesideAnother: a hedge that fails
// after the deadline while the first attempt is in flight is not replaced
// at once (as it would be before the deadline); the call waits for the
// first attempt.
func TestNoAttemptStartsAfterTheDeadlineBesideAnother(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	first, hedge := make(chan struct{}), make(chan struct{})
	op := &scripted{steps: []step{{gate: first, v: 200}, {gate: hedge, err: errBoom}, {v: 201}}}
	ctx := deadlineCtx{context.Background(), t0.Add(2 * time.Second)}
	done := runAsync(ctx, e, Call[int]{Op: promptOp[int]{op}, Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second}})
	waitArmedN(t, fc, 1)
	fc.Advance(time.Second) // the hedge launches, before the deadline
	waitUntil(t, func() bool { return op.Calls() == 2 }, "the hedge")
	fc.Advance(time.Second) // the deadline
	close(hedge)            // the hedge fails: its replacement would start at the deadline
	waitUntil(t, func() bool { return slices.Contains(rec.Events(), "attempt 2 hedge retryable") }, "the hedge's end")
	close(first)
	res := <-done
	if res.Value != 200 || op.Calls() != 2 {
		t.Errorf("got %+v after %d attempts; want attempt 1's 200 after 2: %q", res, op.Calls(), rec.Events())
	}
}

// TestNoHedgeStartsAfterTheDeadline: a hedge timer that fires after the
// deadline launches nothing.
func TestNoHedgeStartsAfterTheDeadline(t *testing.T) {
	for _, prompt := range []bool{false, true} {
		t.Run(fmt.Sprintf("prompt=%v", prompt), func(t *testing.T) {
			fc := fakeclock.New(t0)
			rec := &recorder{}
			e := newTestEngine(fc, rec, engineSpec{})
			gate := make(chan struct{})
			op := &scripted{steps: []step{{gate: gate, v: 200}, {v: 201}}}
			ctx := deadlineCtx{context.Background(), t0.Add(time.Second)}
			done := runAsync(ctx, e, Call[int]{Op: promptly[int](op, prompt), Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: 2 * time.Second}})
			waitArmedN(t, fc, 1)
			fc.Advance(2 * time.Second)
			// The timer's callback (or the driver) decides at once; a hedge
			// it launched would be attempt 2, and answer 201 at once.
			time.Sleep(100 * time.Millisecond)
			close(gate)
			res := <-done
			if res.Value != 200 || op.Calls() != 1 {
				t.Errorf("got %+v after %d attempts; want attempt 1's 200 alone: %q", res, op.Calls(), rec.Events())
			}
		})
	}
}

func waitArmedN(t *testing.T, fc *fakeclock.Clock, n int) {
	t.Helper()
	if !fc.WaitForArmed(n, 5*time.Second) {
		t.Fatalf("timers armed: %d, want %d", fc.Armed(), n)
	}
}

// waitUntil polls cond until it holds, failing the test after a while.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
