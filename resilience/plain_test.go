package resilience

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
	"pgregory.net/rapid"
)

// executePlain repeats the general path's semantics for a plain engine's
// first attempt (see Execute). TestPlainAgreesWithGeneral runs random calls
// through both, each on an engine of its own built from the same
// configuration, and compares everything a caller or an Operation can
// observe: the Result, every Operation method called with its arguments
// (Recycle included),
// the hooks a plain engine may have, and the budget left afterwards.
func TestPlainAgreesWithGeneral(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "steps")
		steps := make([]plainStep, n)
		for i := range steps {
			steps[i] = plainStep{
				v:         100 + i,
				fail:      rapid.IntRange(0, 3).Draw(t, "fail") == 0,
				retryable: rapid.Bool().Draw(t, "retryable"),
				after:     time.Duration(rapid.IntRange(-1, 3).Draw(t, "after")) * time.Second,
				cancel:    rapid.IntRange(0, 7).Draw(t, "cancel") == 0,
			}
		}
		pol := Policy{
			MaxAttempts:   rapid.IntRange(0, 5).Draw(t, "maxAttempts"),
			MaxRetryAfter: time.Duration(rapid.IntRange(-1, 3).Draw(t, "maxRetryAfter")) * time.Second,
		}
		if rapid.Bool().Draw(t, "backoff") {
			pol.Backoff = Constant(time.Duration(rapid.IntRange(0, 2).Draw(t, "backoffSeconds")) * time.Second)
		}
		prep := plainPrepare{
			allow:  rapid.IntRange(0, 4).Draw(t, "allow"),
			why:    rapid.SampledFrom([]EndReason{ReasonNotIdempotent, ReasonBodyNotReplayable}).Draw(t, "why"),
			fail:   rapid.IntRange(0, 9).Draw(t, "prepareFails") == 0,
			cancel: rapid.IntRange(0, 9).Draw(t, "canceledBefore") == 0,
		}
		ratio := rapid.SampledFrom([]float64{0, 0.1, 1}).Draw(t, "ratio")
		reserve := rapid.IntRange(0, 2).Draw(t, "reserve")

		run := func(path func(context.Context, *Engine, Call[int]) Result[int]) []string {
			var out plainOutcome
			clk := &instantClock{now: time.Unix(1_700_000_000, 0)}
			e := newEngine(engineSpec{BudgetRatio: ratio, BudgetReserve: reserve, Clock: clk, Hooks: out.hooks()})
			if !e.plain {
				t.Fatal("test setup: the engine is not plain")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if prep.cancel {
				cancel()
			}
			op := &plainOp{steps: steps, prep: prep, cancel: cancel, out: &out}
			res := path(ctx, e, Call[int]{Key: "k", Op: op, Policy: pol})
			out.add("result value=%d code=%d attempt=%d ownContext=%v needsFinish=%v",
				res.Value, res.Code, res.Attempt, res.Context == ctx, res.fin.needed())
			out.addErr(res.Err)
			res.Finish(nil)
			out.add("budget %.3f", e.Stats().BudgetTokens)
			return out.log
		}
		plain := run(func(ctx context.Context, e *Engine, c Call[int]) Result[int] { return executePlain(ctx, e, &c) })
		general := run(executeRun[int])
		if !slices.Equal(plain, general) {
			t.Fatalf("executePlain and the general path disagree\nplain:   %q\ngeneral: %q", plain, general)
		}
	})
}

// plainStep is one scripted attempt of plainOp.
type plainStep struct {
	v         int
	fail      bool          // return an error instead of v
	retryable bool          // the verdict
	after     time.Duration // Retry-After (when positive)
	cancel    bool          // cancel the caller's context during the attempt
}

// plainPrepare is plainOp's answer to Prepare.
type plainPrepare struct {
	allow  int       // allow at most this many attempts (0: all)
	why    EndReason // the reason for allowing fewer
	fail   bool      // fail Prepare
	cancel bool      // the caller's context ends before the call
}

// plainOp plays steps and logs every call the engine makes to it.
type plainOp struct {
	steps  []plainStep
	prep   plainPrepare
	cancel context.CancelFunc
	out    *plainOutcome
}

func (o *plainOp) step(a AttemptInfo) plainStep { return o.steps[min(a.Number, len(o.steps))-1] }

func (o *plainOp) Prepare(n int) (int, EndReason, error) {
	o.out.add("prepare %d", n)
	if o.prep.fail {
		return 0, 0, errors.New("prepare failed")
	}
	if o.prep.allow > 0 && o.prep.allow < n {
		return o.prep.allow, o.prep.why, nil
	}
	return n, 0, nil
}

func (o *plainOp) Do(ctx context.Context, a AttemptInfo) (int, error) {
	o.out.add("do %+v", a)
	st := o.step(a)
	if st.cancel {
		o.cancel()
	}
	if st.fail {
		return 0, fmt.Errorf("attempt %d failed", a.Number)
	}
	return st.v, nil
}

func (o *plainOp) Classify(v int, err error, a AttemptInfo) Verdict {
	o.out.add("classify %d %v %d", v, err, a.Number)
	st := o.step(a)
	return Verdict{Retryable: st.retryable, Code: v, RetryAfter: st.after, HasRetryAfter: st.after > 0}
}

func (o *plainOp) Retain(_ context.Context, v int) int {
	o.out.add("retain %d", v)
	return v
}

func (o *plainOp) Release(v int) { o.out.add("release %d", v) }

func (o *plainOp) Recycle() { o.out.add("recycle") }

// plainOutcome is the log of what a call did, in order.
type plainOutcome struct {
	mu  sync.Mutex
	log []string
}

func (p *plainOutcome) add(format string, args ...any) {
	p.mu.Lock()
	p.log = append(p.log, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// addErr logs err as a caller tells it apart.
func (p *plainOutcome) addErr(err error) {
	if err == nil {
		p.add("err nil")
		return
	}
	var e *Error
	wrapped := errors.As(err, &e)
	p.add("err %q canceled=%v wrapped=%v", err.Error(), errors.Is(err, context.Canceled), wrapped)
	if wrapped {
		p.add("error attempts=%d reason=%s kept=%d omitted=%d", e.Attempts, e.Reason, len(e.Errs), e.Omitted)
	}
}

// hooks are the hooks a plain engine may have (see Engine.plain).
func (p *plainOutcome) hooks() Hooks {
	return Hooks{
		OnRetry: func(e RetryEvent) {
			p.add("retry after %d delay=%v ra=%v code=%d err=%v", e.Attempt, e.Delay, e.FromRetryAfter, e.Code, e.Err)
		},
		OnBackoff: func(e BackoffEvent) {
			p.add("backoff retry=%d delay=%v slept=%v ra=%v interrupted=%v", e.Retry, e.Delay, e.Slept, e.FromRetryAfter, e.Interrupted)
		},
		OnBudgetExhausted: func(e BudgetEvent) { p.add("budget refused %d %s", e.Attempt, e.Kind) },
	}
}

// instantClock is a clock on which every sleep passes at once: a channel
// timer moves the time on by its duration and fires. The plain path arms
// no other timer.
type instantClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *instantClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *instantClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.now = c.now.Add(max(d, 0))
	now := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return firedTimer{ch}
}

func (c *instantClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("instantClock: the plain path arms no AfterFunc timer")
}

// firedTimer is a channel timer that has fired.
type firedTimer struct{ ch chan time.Time }

func (t firedTimer) C() <-chan time.Time    { return t.ch }
func (firedTimer) Stop() bool               { return false }
func (firedTimer) Reset(time.Duration) bool { return false }
