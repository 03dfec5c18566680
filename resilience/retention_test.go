//go:build !race

// The race detector makes sync.Pool drop items at random, so a pooled run
// would often not be kept at all and the test would prove nothing.

package resilience

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/testwait"
)

// TestFinishedCallsKeepNothingAlive: a finished call's values (its
// subject, its context, its operation, the results it kept) are not kept
// alive by the engine, whose pool keeps the call's run for the next call.
// One collection frees them: a value a pooled run still held would live
// until the second, when sync.Pool drops what it holds. Each case is a call
// whose run is pooled, on each path a pooled run comes from.
func TestFinishedCallsKeepNothingAlive(t *testing.T) {
	br := &BreakerConfig{}
	hooks := Hooks{ // every kind of hook, keeping nothing
		OnCallStart:    func(ctx context.Context, _ CallStartEvent) context.Context { return ctx },
		OnAttemptStart: func(ctx context.Context, _ AttemptStartEvent) context.Context { return ctx },
		OnAttemptEnd:   func(AttemptEndEvent) {},
		OnRetry:        func(RetryEvent) {},
		OnResultDone:   func(ResultDoneEvent) {},
		OnCallEnd:      func(CallEndEvent) {},
	}
	cases := []struct {
		name  string
		cfg   engineSpec
		pol   Policy
		steps []step
	}{
		{"plain engine, retried", engineSpec{}, Policy{MaxAttempts: 3},
			[]step{{v: 503, retryable: true}, {v: 200}}},
		{"plain engine, gave up with a kept result", engineSpec{}, Policy{MaxAttempts: 2},
			[]step{{v: 503, retryable: true}, {v: 503, retryable: true}}},
		{"hedging armed, timeout, breaker and hooks; retried", engineSpec{Breaker: br, Hooks: hooks},
			Policy{MaxAttempts: 3, MaxHedges: 1, HedgeDelay: time.Hour, PerAttemptTimeout: 2 * time.Hour},
			[]step{{v: 503, retryable: true}, {v: 200}}},
		{"timeout without hedging, failed", engineSpec{Breaker: br}, Policy{MaxAttempts: 2, PerAttemptTimeout: time.Hour},
			[]step{{err: errors.New("boom")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(tc.cfg)
			freed := make(chan string, 3)
			if !finishCall(e, tc.pol, tc.steps, freed) {
				t.Fatal("test setup: the call's run was not recycled")
			}
			runtime.GC()
			for range 3 {
				testwait.Recv(t, freed, "a finished call's values to be collected after one GC")
			}
			runtime.KeepAlive(e)
		})
	}
}

// finishCall runs one call on e whose subject, context value and operation
// report to freed once collected, and reports whether the engine recycled
// the operation (pooling the run). It keeps nothing of the call itself.
//
//go:noinline
func finishCall(e *Engine, pol Policy, steps []step, freed chan<- string) bool {
	type ctxKey struct{}
	subject, value := new([64]byte), new([64]byte)
	op := &scripted{steps: steps}
	runtime.AddCleanup(subject, func(c chan<- string) { c <- "subject" }, freed)
	runtime.AddCleanup(value, func(c chan<- string) { c <- "context value" }, freed)
	runtime.AddCleanup(op, func(c chan<- string) { c <- "operation" }, freed)
	ctx := context.WithValue(context.Background(), ctxKey{}, value)
	res := Execute[int](ctx, e, Call[int]{Key: "k", Subject: subject, Op: promptOp[int]{op}, Policy: pol})
	res.Finish(nil)
	return !op.detached()
}
