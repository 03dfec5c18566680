package resilience

import (
	"context"
	"testing"
	"time"
)

// Unknown enum values print their number, never a valid name.
func TestEnumStringOfUnknownValue(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{AttemptKind(7).String(), "AttemptKind(7)"},
		{AttemptOutcome(9).String(), "AttemptOutcome(9)"},
		{EndReason(42).String(), "EndReason(42)"},
		{BreakerState(5).String(), "BreakerState(5)"},
		{KindHedge.String(), "hedge"},
		{AttemptSuccess.String(), "success"},
		{ReasonSuccess.String(), "success"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
}

type ctxKey struct{}

// Breaker transitions and budget refusals carry the context of the call
// that caused them (as OnCallStart returned it), so telemetry can put them
// in that call's trace.
func TestBreakerAndBudgetEventsCarryTheCallContext(t *testing.T) {
	var changes []BreakerStateEvent
	var refusals []BudgetEvent
	hooks := Hooks{
		OnCallStart: func(ctx context.Context, _ CallStartEvent) context.Context {
			return context.WithValue(ctx, ctxKey{}, "call-1")
		},
		OnBreakerStateChange: func(e BreakerStateEvent) { changes = append(changes, e) },
		OnBudgetExhausted:    func(e BudgetEvent) { refusals = append(refusals, e) },
	}
	breaking := newEngine(engineSpec{Breaker: &BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}, Hooks: hooks})
	op := &scripted{steps: []step{{v: 503, retryable: true}}}
	Execute(context.Background(), breaking, Call[int]{Key: "h", Subject: "subject", Op: op, Policy: Policy{MaxAttempts: 3}})
	budgeted := newEngine(engineSpec{BudgetReserve: 1, Hooks: hooks})
	Execute(context.Background(), budgeted, Call[int]{Key: "h", Op: op, Policy: Policy{MaxAttempts: 5}})
	if len(changes) != 1 || changes[0].Key != "h" || changes[0].To != BreakerOpen || changes[0].Subject != "subject" ||
		changes[0].Context.Value(ctxKey{}) != "call-1" {
		t.Errorf("breaker changes %+v, want one to open in the call's context", changes)
	}
	if len(refusals) != 1 || refusals[0].Context.Value(ctxKey{}) != "call-1" {
		t.Errorf("budget refusals %+v, want one in the call's context", refusals)
	}
}

// The engine fires OnAttemptStart itself, before Do, and Do and the later
// events of the attempt get the context the hook returned.
func TestEngineFiresAttemptStart(t *testing.T) {
	type attemptKey struct{}
	var starts []AttemptStartEvent
	var ends []AttemptEndEvent
	e := newEngine(engineSpec{Hooks: Hooks{
		OnAttemptStart: func(ctx context.Context, e AttemptStartEvent) context.Context {
			starts = append(starts, e)
			return context.WithValue(ctx, attemptKey{}, e.Attempt)
		},
		OnAttemptEnd: func(e AttemptEndEvent) { ends = append(ends, e) },
	}})
	op := &scripted{steps: []step{{v: 503, retryable: true}, {v: 200}}}
	res := Execute(context.Background(), e, Call[int]{Key: "k", Op: op, Policy: Policy{MaxAttempts: 2}})
	if res.Value != 200 || len(starts) != 2 || starts[1].Kind != KindRetry || starts[1].Key != "k" {
		t.Fatalf("result %+v, starts %+v", res, starts)
	}
	for i, ctx := range op.ctxs {
		if ctx.Value(attemptKey{}) != i+1 || ends[i].Context.Value(attemptKey{}) != i+1 {
			t.Errorf("attempt %d: Do's or OnAttemptEnd's context is not the one OnAttemptStart returned", i+1)
		}
	}
	if res.Context.Value(attemptKey{}) != 2 {
		t.Errorf("the result's context is not the winning attempt's")
	}
}
