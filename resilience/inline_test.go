package resilience

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// onStackOf reports whether a function whose name contains fn is on the
// calling goroutine's stack: a test's own frame is there only when the code
// runs on the test's goroutine.
func onStackOf(fn string) bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// stackOp records, per attempt, whether it ran on the test's goroutine.
type stackOp struct {
	scripted
	marker string
	inline []bool
}

func (o *stackOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	o.mu.Lock()
	o.inline = append(o.inline, onStackOf(o.marker))
	o.mu.Unlock()
	return o.scripted.Do(ctx, a)
}

// TestCancelableHedgingRunsOnTheCallersGoroutine: armed hedging that never
// fires costs no goroutine: every attempt, retries included, runs on the
// caller's goroutine, and the run is not detached.
func TestCancelableHedgingRunsOnTheCallersGoroutine(t *testing.T) {
	op := &stackOp{marker: "TestCancelableHedgingRunsOnTheCallersGoroutine",
		scripted: scripted{steps: []step{{v: 503, retryable: true}, {v: 200}}}}
	e := newEngine(engineSpec{})
	res := Execute[int](context.Background(), e, Call[int]{Op: promptOp[int]{op},
		Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Hour, PerAttemptTimeout: time.Hour}})
	res.Finish(nil)
	if res.Err != nil || res.Value != 200 || res.Attempt != 2 {
		t.Fatalf("res %+v", res)
	}
	if len(op.inline) != 2 || !op.inline[0] || !op.inline[1] {
		t.Errorf("attempts on the caller's goroutine: %v, want [true true]", op.inline)
	}
	if op.detached() {
		t.Error("not recycled with no hedge fired: nothing else holds the call")
	}
	// Without the promise, the same call runs its attempts on goroutines.
	op2 := &stackOp{marker: "TestCancelableHedgingRunsOnTheCallersGoroutine", scripted: scripted{steps: []step{{v: 200}}}}
	res = Execute[int](context.Background(), e, Call[int]{Op: op2, Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Hour}})
	res.Finish(nil)
	if len(op2.inline) != 1 || op2.inline[0] || !op2.detached() {
		t.Errorf("not prompt: inline %v detached %v, want [false] true", op2.inline, op2.detached())
	}
}

// TestCancelableHedgeTakesOverWhileTheCallerWaits: the hedge fires while
// the caller's attempt runs; the hedge runs elsewhere, wins, and cancels the
// caller's attempt, whose return ends Execute with the hedge's result.
func TestCancelableHedgeTakesOverWhileTheCallerWaits(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	op := &stackOp{marker: "resilience.runAsync", scripted: scripted{steps: []step{{block: true}, {v: 200}}}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptOp[int]{op},
		Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second}})
	if !fc.WaitForArmed(1, 5*time.Second) {
		t.Fatal("hedge timer never armed")
	}
	fc.Advance(time.Second)
	res := <-done
	res.Finish(nil)
	if res.Err != nil || res.Value != 200 || res.Attempt != 2 || !op.detached() {
		t.Fatalf("res %+v", res)
	}
	op.mu.Lock()
	inline, first := op.inline, op.ctxs[0]
	op.mu.Unlock()
	if len(inline) != 2 || !inline[0] || inline[1] {
		t.Errorf("on the caller's goroutine: %v, want [true false]", inline)
	}
	if !errors.Is(context.Cause(first), ErrAttemptLost) {
		t.Errorf("the caller's attempt ended with %v, want ErrAttemptLost", context.Cause(first))
	}
	if rec.end.Hedges != 1 || rec.end.Attempts != 2 {
		t.Errorf("OnCallEnd %+v", rec.end)
	}
}

// TestCancelableCallersAttemptWinsAfterTheHedge: the caller's attempt
// answers after the hedge launched; it wins and the hedge is cancelled.
func TestCancelableCallersAttemptWinsAfterTheHedge(t *testing.T) {
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{})
	gate := make(chan struct{})
	op := &scripted{steps: []step{{gate: gate, v: 201}, {block: true}}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptOp[int]{op},
		Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second}})
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(time.Second)
	waitCalls(t, op, 2) // the hedge launched
	close(gate)
	res := <-done
	res.Finish(nil)
	if res.Value != 201 || res.Attempt != 1 {
		t.Fatalf("res %+v", res)
	}
	op.mu.Lock()
	hedge := op.ctxs[1]
	op.mu.Unlock()
	select {
	case <-hedge.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the losing hedge was not cancelled")
	}
}

// waitCalls waits (in real time, generously) until s has seen n attempts.
func waitCalls(t *testing.T, s *scripted, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.callCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts, want %d", s.callCount(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// panicOfHedgedCall runs a prompt hedging call of op on its own
// goroutine, fires its hedge, calls then, and returns what the call
// panicked with.
func panicOfHedgedCall(t *testing.T, op Operation[int], then func()) any {
	t.Helper()
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{})
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		Execute[int](context.Background(), e, Call[int]{Op: promptOp[int]{op},
			Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second}})
	}()
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(time.Second)
	then()
	select {
	case v := <-got:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("Execute never returned")
		return nil
	}
}

func (s *scripted) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// panicAfterOp's first attempt panics once its context is cancelled or its
// gate opens; later attempts block until cancelled.
type panicAfterOp struct {
	scripted
	gate chan struct{}
}

func (p *panicAfterOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	if a.Number == 1 {
		<-p.gate
		panic("first attempt exploded")
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestCancelableCallersPanicAfterHandover: the caller's own attempt panics
// after the driver took over; the panic surfaces from Execute with its
// value, and the driver winds down (goleak checks it leaves nothing).
func TestCancelableCallersPanicAfterHandover(t *testing.T) {
	op := &panicAfterOp{gate: make(chan struct{})}
	v := panicOfHedgedCall(t, op, func() {
		waitCalls(t, &op.scripted, 2)
		close(op.gate)
	})
	if v != "first attempt exploded" {
		t.Fatalf("recovered %v", v)
	}
}

// hedgePanicOp's hedge panics; the first attempt blocks until cancelled.
type hedgePanicOp struct{ scripted }

func (p *hedgePanicOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	if a.Number > 1 {
		panic("hedge exploded")
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestCancelableHedgePanicReachesTheCaller: a panic on the hedge's goroutine
// cancels the caller's attempt and surfaces from Execute.
func TestCancelableHedgePanicReachesTheCaller(t *testing.T) {
	op := &hedgePanicOp{scripted{steps: []step{{block: true}}}}
	if v := panicOfHedgedCall(t, op, func() {}); v != "hedge exploded" {
		t.Fatalf("recovered %v", v)
	}
}

// TestCancelableHedgeRefusedLeavesTheCallToTheCaller: when the timer fires
// but the budget refuses the hedge, nothing is handed over: the caller's
// attempt goes on alone and its result is returned.
func TestCancelableHedgeRefusedLeavesTheCallToTheCaller(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	// A budget with nothing in it: ratio 0.0001 (one deposit pays no token), no floor.
	e := newTestEngine(fc, rec, engineSpec{BudgetRatio: 0.0001})
	gate := make(chan struct{})
	op := &scripted{steps: []step{{gate: gate, v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptOp[int]{op},
		Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second}})
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(rec.Events(), "budget refused 2 hedge") {
		if time.Now().After(deadline) {
			t.Fatalf("no budget refusal: %q", rec.Events())
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	res := <-done
	res.Finish(nil)
	if res.Value != 200 || res.Attempt != 1 || op.callCount() != 1 {
		t.Fatalf("res %+v after %d attempts", res, op.callCount())
	}
}

// TestCancelableTimerRacingTheAnswer: hedge timers of 20µs race attempts
// of 10 to 30µs on the fake clock, so timers fire not at all, or during an
// attempt, their callbacks racing its return: some find the attempt
// answered (stale callbacks), some take the call over (handovers), across
// a retry. Whatever wins each race, every call returns the one 200 its
// script can give, within MaxAttempts; the race detector (make unit runs
// it) and goleak watch the hand-offs, and a lost result would hang the
// call.
func TestCancelableTimerRacingTheAnswer(t *testing.T) {
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{})
	for i := range 300 {
		op := &countingOp{scripted: &scripted{steps: []step{{v: 503, retryable: true}, {v: 200}}},
			calls: new(atomic.Int32), clock: fc, delay: time.Duration(10+10*(i%3)) * time.Microsecond}
		res := Execute[int](context.Background(), e, Call[int]{Op: promptOp[int]{op},
			Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: 20 * time.Microsecond}})
		res.Finish(nil)
		if res.Err != nil || res.Value != 200 {
			t.Fatalf("call %d: value %d err %v, want 200", i, res.Value, res.Err)
		}
		if n := op.calls.Load(); n > 3 {
			t.Fatalf("call %d: %d attempts, MaxAttempts 3", i, n)
		}
	}
}

// TestCancelableLateTimeoutKeepsItsLength: with hedging armed, an inline
// attempt's per-attempt timeout is armed only if the attempt outlives the
// hedge delay (one timer until then), and it still ends the attempt exactly
// its timeout after the attempt started.
func TestCancelableLateTimeoutKeepsItsLength(t *testing.T) {
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{})
	op := &scripted{steps: []step{{block: true}, {block: true}}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptOp[int]{op},
		Policy: Policy{MaxAttempts: 2, MaxHedges: 1, HedgeDelay: time.Second, PerAttemptTimeout: 3 * time.Second}})
	if !fc.WaitForArmed(1, 5*time.Second) {
		t.Fatal("hedge timer never armed")
	}
	waitCalls(t, op, 1)
	if n := fc.Pending(); n != 1 {
		t.Fatalf("%d timers armed for the first attempt, want 1 (the hedge's)", n)
	}
	fc.Advance(time.Second) // the hedge: the first attempt's timeout now runs, for 2s more
	waitCalls(t, op, 2)
	deadline := time.Now().Add(5 * time.Second)
	for fc.Pending() != 2 { // both attempts' timeouts
		if time.Now().After(deadline) {
			t.Fatalf("%d timers pending, want 2", fc.Pending())
		}
		time.Sleep(time.Millisecond)
	}
	op.mu.Lock()
	first, hedge := op.ctxs[0], op.ctxs[1]
	op.mu.Unlock()
	fc.Advance(2*time.Second - time.Millisecond)
	// A timer that fell due would have left the pending ones during
	// Advance: no need to wait and see whether its callback runs.
	if n := fc.Pending(); n != 2 || first.Err() != nil {
		t.Fatalf("%d timers pending, first attempt ended %v: a timeout fell due before its 3s", n, context.Cause(first))
	}
	fc.Advance(time.Millisecond) // 3s after the first attempt started
	select {
	case <-first.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("first attempt not cut off at 3s")
	}
	if !errors.Is(context.Cause(first), ErrAttemptTimeout) {
		t.Fatalf("first attempt ended with %v, want ErrAttemptTimeout", context.Cause(first))
	}
	if hedge.Err() != nil {
		t.Fatalf("the hedge ended with %v at 3s; its own timeout is at 4s", context.Cause(hedge))
	}
	fc.Advance(time.Second)
	res := <-done
	if !errors.Is(res.Err, ErrAttemptTimeout) || res.Attempt != 0 {
		t.Fatalf("res %+v, want both attempts timed out", res)
	}
}
