package resilience

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"pgregory.net/rapid"
)

// step is one scripted attempt result.
type step struct {
	v         int
	err       error
	retryable bool
	throttle  bool          // a throttle: Verdict.Throttle and Overload
	pushback  bool          // Verdict.Pushback: retried below
	after     time.Duration // Retry-After
	block     bool          // wait for the attempt's context to end
	gate      chan struct{} // wait for this channel (or the context) first
}

// scripted is an Operation that plays steps in attempt order.
type scripted struct {
	steps    []step
	maxAllow int // Prepare's answer; 0 means allow all
	why      EndReason

	mu       sync.Mutex
	calls    int
	released []int
	recycled int
	retained []int
	ctxs     []context.Context
}

func (s *scripted) Prepare(n int) (int, EndReason, error) {
	if s.maxAllow > 0 {
		return min(n, s.maxAllow), s.why, nil
	}
	return n, 0, nil
}

func (s *scripted) Do(ctx context.Context, a AttemptInfo) (int, error) {
	s.mu.Lock()
	s.calls++
	st := s.steps[min(a.Number, len(s.steps))-1]
	s.ctxs = append(s.ctxs, ctx)
	s.mu.Unlock()
	if st.gate != nil {
		select {
		case <-st.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if st.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return st.v, st.err
}

func (s *scripted) Classify(v int, err error, a AttemptInfo) Verdict {
	if err != nil && (errors.Is(err, ErrAttemptTimeout)) {
		return Verdict{Retryable: true}
	}
	st := s.steps[min(a.Number, len(s.steps))-1]
	if st.block || st.gate != nil {
		return Verdict{Retryable: err != nil && !errors.Is(err, context.Canceled)}
	}
	return Verdict{Retryable: st.retryable, Throttle: st.throttle, Overload: st.throttle, Pushback: st.pushback,
		Code: v, RetryAfter: st.after, HasRetryAfter: st.after > 0}
}

func (s *scripted) Retain(_ context.Context, v int) int {
	s.mu.Lock()
	s.retained = append(s.retained, v)
	s.mu.Unlock()
	return v
}

func (s *scripted) Release(v int) {
	s.mu.Lock()
	s.released = append(s.released, v)
	s.mu.Unlock()
}

// Recycle counts the engine's recycling of s (see recycler).
func (s *scripted) Recycle() {
	s.mu.Lock()
	s.recycled++
	s.mu.Unlock()
}

// detached reports whether the engine never recycled s: something besides
// the caller may still have been using it when Execute returned.
func (s *scripted) detached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recycled == 0
}

// promptOp marks an Operation as cancelling promptly (see prompt),
// forwarding Recycle to it.
type promptOp[T any] struct{ Operation[T] }

func (promptOp[T]) CancelsPromptly() {}

func (p promptOp[T]) Recycle() {
	if r, ok := p.Operation.(recycler); ok {
		r.Recycle()
	}
}

// promptly returns op marked as cancelling promptly when yes is set.
func promptly[T any](op Operation[T], yes bool) Operation[T] {
	if yes {
		return promptOp[T]{op}
	}
	return op
}

func (s *scripted) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// recorder collects events from every hook.
type recorder struct {
	mu     sync.Mutex
	events []string
	end    CallEndEvent
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		OnCallStart: func(ctx context.Context, e CallStartEvent) context.Context {
			r.add("start %s", e.Key)
			return ctx
		},
		OnAttemptEnd: func(e AttemptEndEvent) { r.add("attempt %d %s %s", e.Attempt, e.Kind, e.Outcome) },
		OnRetry:      func(e RetryEvent) { r.add("retry after %d in %v ra=%v", e.Attempt, e.Delay, e.FromRetryAfter) },
		OnBackoff:    func(e BackoffEvent) { r.add("backoff %d %v slept=%v", e.Retry, e.Delay, e.Slept) },
		OnHedge:      func(e HedgeEvent) { r.add("hedge %d inflight=%d", e.Attempt, e.InFlight) },
		OnBudgetExhausted: func(e BudgetEvent) {
			r.add("budget refused %d %s", e.Attempt, e.Kind)
		},
		OnBreakerReject: func(e BreakerRejectEvent) { r.add("breaker rejected %d %s", e.Attempt, e.State) },
		OnBreakerStateChange: func(e BreakerStateEvent) {
			r.add("breaker %s %s->%s", e.Key, e.From, e.To)
		},
		OnCallEnd: func(e CallEndEvent) {
			r.add("end %s attempts=%d retries=%d hedges=%d", e.Reason, e.Attempts, e.Retries, e.Hedges)
			r.mu.Lock()
			r.end = e
			r.mu.Unlock()
		},
	}
}

func (r *recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

var errBoom = errors.New("boom")

// engineSpec is an engine's configuration as these tests write it: a zero
// field is off, as an engine's was before its settings had defaults (no
// budget, and through the engine's policy one attempt, no backoff, no
// wait for a server-dictated delay, no hedging), so each test sets what it
// exercises; the hooks ride along. newEngine builds the engine.
type engineSpec struct {
	BudgetRatio   float64
	BudgetReserve int
	Breaker       *BreakerConfig
	Hooks         Hooks
	HooksFor      func(e *Engine) Hooks
	Clock         clock.Clock
	Adaptive      *AdaptiveHedging
	Limit         *ConcurrencyLimit
	MaxKeys       int
}

// settings returns the Settings that say what c says.
func (c engineSpec) settings() Settings {
	orOff := func(v float64) float64 {
		if v == 0 {
			return Off
		}
		return v
	}
	return Settings{MaxAttempts: 1, Backoff: Constant(0), MaxRetryAfter: Off,
		BudgetRatio: orOff(c.BudgetRatio), BudgetReserve: int(orOff(float64(c.BudgetReserve))),
		Breaker: c.Breaker, Clock: c.Clock, AdaptiveHedging: c.Adaptive, ConcurrencyLimit: c.Limit, MaxKeys: c.MaxKeys}
}

// newEngine builds the engine c describes.
func newEngine(c engineSpec) *Engine {
	return NewEngine(c.settings(), func(*Engine) Hooks { return c.Hooks }, c.HooksFor)
}

func newTestEngine(fc *fakeclock.Clock, rec *recorder, cfg engineSpec) *Engine {
	cfg.Clock = fc
	if rec != nil {
		cfg.Hooks = rec.hooks()
	}
	return newEngine(cfg)
}

// runAsync starts Execute on its own goroutine.
func runAsync(ctx context.Context, e *Engine, c Call[int]) <-chan Result[int] {
	out := make(chan Result[int], 1)
	go func() { out <- Execute(ctx, e, c) }()
	return out
}

func TestEngineRetriesWithBackoffOnTheClock(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	op := &scripted{steps: []step{{v: 503, retryable: true}, {v: 503, retryable: true}, {v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Key: "k", Op: op, Policy: Policy{MaxAttempts: 3, Backoff: Exponential(time.Second, time.Minute)}})

	if !fc.WaitForArmed(1, 5*time.Second) {
		t.Fatal("first backoff never started")
	}
	fc.Advance(999 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("returned before the first backoff elapsed")
	default:
	}
	fc.Advance(time.Millisecond)
	if !fc.WaitForArmed(2, 5*time.Second) {
		t.Fatal("second backoff never started")
	}
	fc.Advance(2 * time.Second) // the second retry waits base*2
	res := <-done
	if res.Err != nil || res.Value != 200 || res.Attempt != 3 {
		t.Fatalf("result %+v", res)
	}
	want := []string{
		"start k",
		"attempt 1 initial retryable", "retry after 1 in 1s ra=false", "backoff 1 1s slept=1s",
		"attempt 2 retry retryable", "retry after 2 in 2s ra=false", "backoff 2 2s slept=2s",
		"attempt 3 retry success", "end success attempts=3 retries=2 hedges=0",
	}
	if got := rec.Events(); !slices.Equal(got, want) {
		t.Fatalf("events:\n%q\nwant\n%q", got, want)
	}
	if rec.end.Backoff != 3*time.Second {
		t.Fatalf("total backoff %v", rec.end.Backoff)
	}
	if !slices.Equal(op.released, []int{503, 503}) {
		t.Fatalf("superseded results not released: %v", op.released)
	}
}

func TestEngineGiveUpReturnsMostRecentRetryableValue(t *testing.T) {
	op := &scripted{steps: []step{{v: 502, retryable: true}, {err: errBoom, retryable: true}, {v: 504, retryable: true}}}
	e := newEngine(engineSpec{})
	res := Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 3}})
	if res.Err != nil || res.Value != 504 {
		t.Fatalf("got %+v, want the 504 with nil error", res)
	}
	if !slices.Equal(op.released, []int{502}) {
		t.Fatalf("released %v, want the superseded 502", op.released)
	}
}

func TestEngineGiveUpWrapsEveryAttemptError(t *testing.T) {
	first := errors.New("first")
	op := &scripted{steps: []step{{err: first, retryable: true}, {err: errBoom, retryable: true}}}
	rec := &recorder{}
	e := newEngine(engineSpec{Hooks: rec.hooks()})
	res := Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 2}})
	var ge *Error
	if !errors.As(res.Err, &ge) || ge.Attempts != 2 || ge.Err != errBoom || ge.Reason != ReasonAttemptsExhausted {
		t.Fatalf("err = %#v", res.Err)
	}
	if !errors.Is(res.Err, first) || !errors.Is(res.Err, errBoom) {
		t.Fatal("errors.Is does not find every attempt's error")
	}
	if rec.end.Reason != ReasonAttemptsExhausted || rec.end.Err != res.Err {
		t.Fatalf("end event %+v", rec.end)
	}
}

func TestEngineSingleAttemptErrorIsNotWrapped(t *testing.T) {
	op := &scripted{steps: []step{{err: errBoom, retryable: true}}}
	res := Execute(context.Background(), newEngine(engineSpec{}), Call[int]{Op: op, Policy: Policy{MaxAttempts: 1}})
	if res.Err != errBoom {
		t.Fatalf("err = %#v, want the bare attempt error", res.Err)
	}
}

func TestEngineNonRetryableErrorEndsTheCall(t *testing.T) {
	op := &scripted{steps: []step{{v: 503, retryable: true}, {err: errBoom}, {v: 200}}}
	rec := &recorder{}
	res := Execute(context.Background(), newEngine(engineSpec{Hooks: rec.hooks()}), Call[int]{Op: op, Policy: Policy{MaxAttempts: 3}})
	var ge *Error
	if !errors.As(res.Err, &ge) || ge.Reason != ReasonNotRetryable || op.Calls() != 2 {
		t.Fatalf("err %v after %d calls", res.Err, op.Calls())
	}
	if !slices.Equal(op.released, []int{503}) {
		t.Fatalf("retained 503 not released: %v", op.released)
	}
}

func TestEnginePrepareLimitsAttemptsWithReason(t *testing.T) {
	op := &scripted{steps: []step{{v: 503, retryable: true}}, maxAllow: 1, why: ReasonNotIdempotent}
	rec := &recorder{}
	res := Execute(context.Background(), newEngine(engineSpec{Hooks: rec.hooks()}), Call[int]{Op: op, Policy: Policy{MaxAttempts: 5}})
	if res.Value != 503 || op.Calls() != 1 || rec.end.Reason != ReasonNotIdempotent {
		t.Fatalf("res %+v calls %d reason %v", res, op.Calls(), rec.end.Reason)
	}
}

func TestEngineRetryAfterReplacesBackoff(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	op := &scripted{steps: []step{{v: 429, retryable: true, after: 7 * time.Second}, {v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 2, Backoff: Constant(time.Hour), MaxRetryAfter: 10 * time.Second}})
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(7 * time.Second)
	if res := <-done; res.Value != 200 {
		t.Fatalf("res %+v", res)
	}
	if !slices.Contains(rec.Events(), "retry after 1 in 7s ra=true") {
		t.Fatalf("events %q", rec.Events())
	}
}

func TestEngineRetryAfterLimits(t *testing.T) {
	cases := []struct {
		name     string
		after    time.Duration
		deadline time.Duration
		want     EndReason
	}{
		{"above the cap", 11 * time.Second, 0, ReasonRetryAfterTooLong},
		{"past the deadline", 5 * time.Second, 4 * time.Second, ReasonPastDeadline},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := fakeclock.New(time.Now())
			rec := &recorder{}
			e := newTestEngine(fc, rec, engineSpec{})
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, fc.Now().Add(c.deadline))
				defer cancel()
			}
			op := &scripted{steps: []step{{v: 503, retryable: true, after: c.after}, {v: 200}}}
			res := Execute(ctx, e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 3, MaxRetryAfter: 10 * time.Second}})
			if res.Err != nil || res.Value != 503 || op.Calls() != 1 || rec.end.Reason != c.want {
				t.Fatalf("res %+v calls %d reason %v", res, op.Calls(), rec.end.Reason)
			}
		})
	}
}

func TestEngineCancelledDuringBackoffReturnsContextError(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	ctx, cancel := context.WithCancel(context.Background())
	op := &scripted{steps: []step{{v: 503, retryable: true}, {v: 200}}}
	done := runAsync(ctx, e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 2, Backoff: Constant(time.Minute)}})
	fc.WaitForArmed(1, 5*time.Second)
	cancel()
	res := <-done
	if !errors.Is(res.Err, context.Canceled) || res.Err != context.Canceled {
		t.Fatalf("err = %#v, want context.Canceled itself", res.Err)
	}
	if !slices.Equal(op.released, []int{503}) || rec.end.Reason != ReasonCanceled {
		t.Fatalf("released %v reason %v", op.released, rec.end.Reason)
	}
}

func TestEngineBudgetStopsRetries(t *testing.T) {
	rec := &recorder{}
	e := newEngine(engineSpec{BudgetReserve: 1, Hooks: rec.hooks()})
	op := &scripted{steps: []step{{v: 503, retryable: true}}}
	res := Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 5}})
	// The floor allows one retry in this second; the second retry is refused.
	if res.Value != 503 || op.Calls() != 2 || rec.end.Reason != ReasonBudgetExhausted {
		t.Fatalf("res %+v calls %d reason %v", res, op.Calls(), rec.end.Reason)
	}
	if !slices.Contains(rec.Events(), "budget refused 3 retry") {
		t.Fatalf("events %q", rec.Events())
	}
}

func TestEngineBreakerRejectsAtAdmission(t *testing.T) {
	rec := &recorder{}
	e := newEngine(engineSpec{Breaker: &BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}, Hooks: rec.hooks()})
	op := &scripted{steps: []step{{v: 503, retryable: true}}}
	Execute(context.Background(), e, Call[int]{Key: "h", Op: op, Policy: Policy{MaxAttempts: 3}})
	if op.Calls() != 1 || rec.end.Reason != ReasonCircuitOpen {
		t.Fatalf("breaker opened mid-call but %d attempts ran, reason %v", op.Calls(), rec.end.Reason)
	}
	res := Execute(context.Background(), e, Call[int]{Key: "h", Op: op, Policy: Policy{MaxAttempts: 3}})
	if !errors.Is(res.Err, ErrCircuitOpen) || op.Calls() != 1 {
		t.Fatalf("open breaker: err %v, calls %d", res.Err, op.Calls())
	}
	ev := rec.Events()
	for _, want := range []string{"breaker h closed->open", "breaker rejected 2 open", "breaker rejected 0 open", "end circuit_open attempts=0 retries=0 hedges=0"} {
		if !slices.Contains(ev, want) {
			t.Errorf("missing %q in %q", want, ev)
		}
	}
}

func TestEngineProbeGetsOneAttempt(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{Breaker: &BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second}})
	op := &scripted{steps: []step{{v: 503, retryable: true}}}
	Execute(context.Background(), e, Call[int]{Key: "h", Op: op, Policy: Policy{MaxAttempts: 1}})
	fc.Advance(time.Second)
	res := Execute(context.Background(), e, Call[int]{Key: "h", Op: op, Policy: Policy{MaxAttempts: 5, MaxHedges: 2, HedgeDelay: time.Millisecond}})
	if op.Calls() != 2 || res.Value != 503 || !rec.end.Probe || rec.end.Reason != ReasonCircuitOpen {
		t.Fatalf("probe: calls %d res %+v end %+v", op.Calls(), res, rec.end)
	}
	if h, _ := e.Stats().Host("h"); h.Breaker != BreakerOpen {
		t.Fatal("failed probe did not re-open the breaker")
	}
}

// Both hedging modes: attempts on goroutines from the start, and a
// prompt call (see prompt) whose first attempt runs on the caller's goroutine.
func TestEngineHedgeWinsAndLoserIsCancelled(t *testing.T) {
	for _, cancelable := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelable=%v", cancelable), func(t *testing.T) { testHedgeWins(t, cancelable) })
	}
}

func testHedgeWins(t *testing.T, cancelable bool) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	op := &scripted{steps: []step{{block: true}, {v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptly[int](op, cancelable), Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: 50 * time.Millisecond}})
	if !fc.WaitForArmed(1, 5*time.Second) {
		t.Fatal("hedge timer never armed")
	}
	fc.Advance(50 * time.Millisecond)
	res := <-done
	if res.Err != nil || res.Value != 200 || res.Attempt != 2 || !res.fin.needed() {
		t.Fatalf("res %+v", res)
	}
	res.Finish(nil)
	op.mu.Lock()
	loser := op.ctxs[0]
	op.mu.Unlock()
	select {
	case <-loser.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("loser's context not cancelled")
	}
	// The loser reports itself cancelled, possibly after Execute returned.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(rec.Events(), "attempt 1 initial cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("events %q", rec.Events())
		}
		time.Sleep(time.Millisecond)
	}
	if !slices.Contains(rec.Events(), "hedge 2 inflight=2") || rec.end.Hedges != 1 {
		t.Fatalf("events %q", rec.Events())
	}
}

func TestEngineWinnerContextLivesUntilFinish(t *testing.T) {
	op := &scripted{steps: []step{{v: 200}}}
	res := Execute(context.Background(), newEngine(engineSpec{}), Call[int]{Op: op, Policy: Policy{MaxAttempts: 2, PerAttemptTimeout: time.Hour}})
	if res.Context.Err() != nil {
		t.Fatal("winner's context cancelled before Finish")
	}
	res.Finish(nil)
	if res.Context.Err() == nil {
		t.Fatal("Finish did not release the winner's context")
	}
}

func TestEngineRetryableWhileOtherInFlightLaunchesImmediately(t *testing.T) {
	for _, cancelable := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelable=%v", cancelable), func(t *testing.T) { testRetryableWhileInFlight(t, cancelable) })
	}
}

func testRetryableWhileInFlight(t *testing.T, cancelable bool) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	gate := make(chan struct{})
	op := &scripted{steps: []step{{gate: gate, v: 200}, {v: 503, retryable: true}, {v: 201}}}
	done := runAsync(context.Background(), e, Call[int]{Op: promptly[int](op, cancelable), Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Second, Backoff: Constant(time.Hour)}})
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(time.Second) // hedge (attempt 2) launches and fails at once; attempt 3 follows with no sleep
	res := <-done
	if res.Value != 201 {
		t.Fatalf("res %+v events %q", res, rec.Events())
	}
	close(gate)
	if !slices.Contains(rec.Events(), "retry after 2 in 0s ra=false") {
		t.Fatalf("events %q", rec.Events())
	}
}

func TestEnginePerAttemptTimeoutIsRetried(t *testing.T) {
	fc := fakeclock.New(t0)
	rec := &recorder{}
	e := newTestEngine(fc, rec, engineSpec{})
	op := &scripted{steps: []step{{block: true}, {v: 200}}}
	done := runAsync(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 2, PerAttemptTimeout: time.Second}})
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(time.Second)
	if res := <-done; res.Value != 200 {
		t.Fatalf("res %+v", res)
	}
	if !slices.Contains(rec.Events(), "attempt 1 initial retryable") {
		t.Fatalf("events %q", rec.Events())
	}
}

func TestEngineAttemptTimeoutErrorIsDistinct(t *testing.T) {
	fc := fakeclock.New(t0)
	e := newTestEngine(fc, nil, engineSpec{})
	op := &scripted{steps: []step{{block: true}}}
	done := runAsync(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 1, PerAttemptTimeout: time.Second}})
	fc.WaitForArmed(1, 5*time.Second)
	fc.Advance(time.Second)
	res := <-done
	if !errors.Is(res.Err, ErrAttemptTimeout) || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestCombineCallsBothInOrder(t *testing.T) {
	var got []string
	type key struct{}
	a := Hooks{
		OnRetry:     func(RetryEvent) { got = append(got, "a") },
		OnCallStart: func(ctx context.Context, _ CallStartEvent) context.Context { return context.WithValue(ctx, key{}, "a") },
	}
	b := Hooks{
		OnRetry: func(RetryEvent) { got = append(got, "b") },
		OnCallStart: func(ctx context.Context, _ CallStartEvent) context.Context {
			got = append(got, "b saw "+ctx.Value(key{}).(string))
			return ctx
		},
	}
	h := Combine(a, b)
	h.OnRetry(RetryEvent{})
	h.OnCallStart(context.Background(), CallStartEvent{})
	if !slices.Equal(got, []string{"a", "b", "b saw a"}) {
		t.Fatalf("got %q", got)
	}
	if a.OnHedge != nil || b.OnHedge != nil || h.OnHedge != nil {
		t.Fatal("Combine invented a hook")
	}
}

// TestEngineNeverExceedsMaxAttempts: whatever the results, hedges and
// retries together never make more than MaxAttempts calls.
func TestEngineNeverExceedsMaxAttempts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxAttempts := rapid.IntRange(1, 6).Draw(t, "max")
		hedges := rapid.IntRange(0, 3).Draw(t, "hedges")
		n := rapid.IntRange(1, 8).Draw(t, "steps")
		steps := make([]step, n)
		for i := range steps {
			steps[i] = step{v: i, retryable: rapid.Bool().Draw(t, "retryable")}
		}
		var calls atomic.Int32
		fc := fakeclock.New(t0)
		op := &countingOp{scripted: &scripted{steps: steps}, calls: &calls, clock: fc, delay: time.Duration(rapid.IntRange(0, 200).Draw(t, "us")) * time.Microsecond}
		e := newTestEngine(fc, nil, engineSpec{})
		cancelable := rapid.Bool().Draw(t, "cancelable")
		Execute[int](context.Background(), e, Call[int]{Op: promptly[int](op, cancelable), Policy: Policy{MaxAttempts: maxAttempts, MaxHedges: hedges, HedgeDelay: 50 * time.Microsecond}})
		if c := int(calls.Load()); c > maxAttempts {
			t.Fatalf("%d attempts, MaxAttempts %d", c, maxAttempts)
		}
	})
}

// countingOp counts its attempts, each of which takes delay on the fake
// clock: it moves the clock on by delay, so hedge timers fall due during
// the attempt and their callbacks (on goroutines of their own) race its
// return.
type countingOp struct {
	*scripted
	calls *atomic.Int32
	clock *fakeclock.Clock
	delay time.Duration
}

func (c *countingOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	c.calls.Add(1)
	c.clock.Advance(c.delay)
	return c.scripted.Do(ctx, a)
}

type panicOp struct{ scripted }

func (p *panicOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	panic("attempt exploded")
}

// TestEnginePanicOnAttemptGoroutinePropagatesToCaller: with hedging on,
// attempts run on their own goroutines; a panic there must surface from
// Execute, as it would without hedging, instead of killing the process.
func TestEnginePanicOnAttemptGoroutinePropagatesToCaller(t *testing.T) {
	op := &panicOp{}
	got := func() (v any) {
		defer func() { v = recover() }()
		Execute[int](context.Background(), newEngine(engineSpec{}), Call[int]{Op: op, Policy: Policy{MaxAttempts: 2, MaxHedges: 1, HedgeDelay: time.Hour}})
		return nil
	}()
	if got != "attempt exploded" {
		t.Fatalf("recovered %v", got)
	}
}

// An Operation is recycled (see recycler) only when no late attempt may
// still use it after Execute returned: not when the call hedged on
// goroutines of its own.
func TestRecycledOnlyWhenNotHedging(t *testing.T) {
	seq, hedged := &scripted{steps: []step{{v: 200}}}, &scripted{steps: []step{{v: 200}}}
	r1 := Execute(context.Background(), newEngine(engineSpec{}), Call[int]{Op: seq, Policy: Policy{MaxAttempts: 3, PerAttemptTimeout: time.Hour}})
	r2 := Execute(context.Background(), newEngine(engineSpec{}), Call[int]{Op: hedged, Policy: Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Hour}})
	r1.Finish(nil)
	r2.Finish(nil)
	if seq.detached() || !hedged.detached() {
		t.Errorf("detached: sequential %v, hedged %v; want false, true", seq.detached(), hedged.detached())
	}
}
