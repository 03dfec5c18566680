package resilience

import (
	"context"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

// Throttles (Verdict.Throttle: the server asking for less) and the
// breaker: ignored, neither a failure nor a success (issue #37).

var (
	throttleStep = step{v: 429, retryable: true, throttle: true}
	downStep     = step{v: 503, retryable: true} // a 503 without Retry-After: a failure
	fineStep     = step{v: 200}
)

// breakerAfter runs one call of each step on e, at key "h", with attempts
// attempts each, and returns the breaker's state after the last.
func breakerAfter(t *testing.T, e *Engine, attempts int, steps ...step) BreakerState {
	t.Helper()
	for _, st := range steps {
		op := &scripted{steps: []step{st}}
		Execute(context.Background(), e, Call[int]{Key: "h", Op: op, Policy: Policy{MaxAttempts: attempts}})
	}
	h, _ := e.Stats().Host("h")
	return h.Breaker
}

func repeat(st step, n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = st
	}
	return out
}

func TestThrottlesNeverOpenTheBreaker(t *testing.T) {
	cases := []struct {
		name     string
		attempts int // 1: the throttle ends the call (endWith); 3: it is retried (retry)
		steps    []step
		want     BreakerState
	}{
		{"10 throttles in a row, one attempt each", 1, repeat(throttleStep, 10), BreakerClosed},
		{"10 calls retrying throttles, three attempts each", 3, repeat(throttleStep, 10), BreakerClosed},
		{"5 bare 503s open it", 1, repeat(downStep, 5), BreakerOpen},
		{"5 bare 503s retried open it", 3, repeat(downStep, 2), BreakerOpen}, // 6 failed attempts
		// A throttle is no success: it does not clear the failures before it.
		{"4 failures, 10 throttles, 1 failure", 1, append(append(repeat(downStep, 4), repeat(throttleStep, 10)...), downStep), BreakerOpen},
		// A success does.
		{"4 failures, a success, 1 failure", 1, append(append(repeat(downStep, 4), fineStep), downStep), BreakerClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(fakeclock.New(t0), nil, engineSpec{Breaker: &BreakerConfig{OpenDuration: time.Minute}})
			if got := breakerAfter(t, e, tc.attempts, tc.steps...); got != tc.want {
				t.Errorf("breaker %v, want %v", got, tc.want)
			}
		})
	}
}

// A half-open breaker's probe that meets a throttle decides nothing: the
// breaker stays half-open, the probe's slot is free, and the next call is
// the probe that decides.
func TestThrottleDuringHalfOpenDecidesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		next step
		want BreakerState
	}{
		{"then a success closes it", fineStep, BreakerClosed},
		{"then a failure opens it again", downStep, BreakerOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(t0)
			rec := &recorder{}
			e := newTestEngine(fc, rec, engineSpec{Breaker: &BreakerConfig{FailureThreshold: 1, OpenDuration: time.Second}})
			if got := breakerAfter(t, e, 1, downStep); got != BreakerOpen {
				t.Fatalf("breaker %v after a failure at threshold 1, want open", got)
			}
			fc.Advance(time.Second)
			for i := range 3 {
				if got := breakerAfter(t, e, 3, throttleStep); got != BreakerHalfOpen {
					t.Fatalf("breaker %v after throttled probe %d, want still half-open", got, i+1)
				}
				if !rec.end.Probe || rec.end.Attempts != 1 {
					t.Fatalf("call %d: probe %v, %d attempts; want a probe of one attempt", i+1, rec.end.Probe, rec.end.Attempts)
				}
			}
			if got := breakerAfter(t, e, 3, tc.next); got != tc.want || !rec.end.Probe {
				t.Errorf("breaker %v after the deciding probe (a probe: %v), want %v", got, rec.end.Probe, tc.want)
			}
		})
	}
}
