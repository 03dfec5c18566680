package resilience

import (
	"errors"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Admission: the breaker and the budget decide whether a call, and each
// further attempt, may go ahead. Refusals fire their hooks here.

// admit asks the breaker to admit the call and lets the operation prepare
// it; it reports false with the call's result when the call ends here. A
// probe's ticket is held from the moment the breaker issues it: the caller
// (execute) arms unwindProbe for it before anything that may panic runs.
func (r *run[T]) admit() (ticket, transition, Result[T], bool) {
	e, c := r.e, r.c
	var (
		tk ticket
		tr transition
	)
	if e.breakers != nil && c.Key != "" {
		t, trn, err := e.breakers.admit(c.Key, r.now())
		if err != nil {
			r.report(trn)
			if h := e.hooks.OnBreakerReject; h != nil {
				var coe *CircuitOpenError
				errors.As(err, &coe)
				h(BreakerRejectEvent{Event: r.event(), State: coe.State})
			}
			return ticket{}, transition{}, r.end(Result[T]{Err: err}, ReasonCircuitOpen), false
		}
		tk, tr = t, trn
	}
	if tk.Probe() {
		r.probe, r.probeHeld = true, true
		r.maxAttempts = 1
	}
	return tk, tr, Result[T]{}, true
}

// prepare reports the breaker's transition of admit (tr) and lets the
// operation prepare the call admitted with tk; it reports false with the
// call's result when the call ends here.
func (r *run[T]) prepare(tk ticket, tr transition) (Result[T], bool) {
	e, c := r.e, r.c
	r.report(tr)
	r.limitReason = ReasonAttemptsExhausted
	n, why, err := c.Op.Prepare(r.maxAttempts)
	if err != nil {
		r.probeHeld = false
		r.report(e.breakers.done(tk, outcomeIgnore, e.seconds.Time()))
		return r.end(Result[T]{Err: err}, ReasonNotRetryable), false
	}
	if n < r.maxAttempts {
		r.maxAttempts = max(1, n)
		r.limitReason = why
	}
	if r.probe {
		r.limitReason = ReasonCircuitOpen
	}
	return Result[T]{}, true
}

// unwindProbe returns the probe slot that ticket t holds when the call is
// unwound by a panic (of a hook, Prepare, Do or Classify, which propagate)
// before its one attempt settled: without it, the half-open breaker would
// count the probe in flight forever and reject every later request. The
// probe counts as neither success nor failure, so the next request is
// admitted as a probe again. It is deferred only for a probe, so a call
// through a closed breaker (or none) runs no defer for it; on a call that
// returns it finds the slot already returned and does nothing.
func (r *run[T]) unwindProbe(t ticket) {
	if !r.probeHeld {
		return
	}
	r.probeHeld = false
	r.e.breakers.done(t, outcomeIgnore, r.e.seconds.Time()) // no transition: the outcome is ignored
	r.first.own.cancel(ErrAttemptLost)                      // the probe's attempt, if it had its own context
}

// now is the call's start when it was read (see Engine.timed), else the
// current second: what the budget and a closed breaker need.
func (r *run[T]) now() time.Time {
	if r.e.timed {
		return r.start
	}
	return r.e.seconds.Time()
}

// clockNow reads the engine's clock for the call's timing: cheaply, from the
// call's start (see clock.NowFrom), when the call was timed from its start.
func (r *run[T]) clockNow() time.Time {
	if r.start.IsZero() {
		return r.e.clock.Now()
	}
	return clock.NowFrom(r.e.clock, r.start)
}

// report forwards a breaker transition to the hook, in the call's context.
// Never called with a lock held.
func (r *run[T]) report(tr transition) {
	if h := r.e.hooks.OnBreakerStateChange; h != nil && tr.Changed() {
		h(BreakerStateEvent{Event: Event{Context: r.ctx, Key: tr.Key, Subject: r.c.Subject}, From: tr.From, To: tr.To})
	}
}

// admitNext asks the budget, then the breaker, for one more attempt of kind
// k. It returns the breaker's ticket and the budget's token (to refund if the
// attempt does not launch after all), or the reason it was refused. A
// token taken before a refusal by the breaker is refunded here.
func (r *run[T]) admitNext(k AttemptKind) (ticket, budgetToken, EndReason, bool) {
	tok, ok := r.spend(k)
	if !ok {
		return ticket{}, tok, ReasonBudgetExhausted, false
	}
	t, ok := r.admitBreaker()
	if !ok {
		tok.Refund()
		return t, budgetToken{}, ReasonCircuitOpen, false
	}
	return t, tok, 0, true
}

// spend takes one token from the budget for an attempt of kind k, reporting
// a refusal to OnBudgetExhausted.
func (r *run[T]) spend(k AttemptKind) (budgetToken, bool) {
	tok, ok := r.e.budget.take(r.e.clock.Now())
	if !ok {
		if h := r.e.hooks.OnBudgetExhausted; h != nil {
			h(BudgetEvent{Event: r.event(), Attempt: r.launched + 1, Kind: k})
		}
	}
	return tok, ok
}

// admitBreaker asks the breaker to admit one more attempt, reporting a
// refusal to OnBreakerReject.
func (r *run[T]) admitBreaker() (ticket, bool) {
	e := r.e
	if e.breakers == nil || r.c.Key == "" {
		return ticket{}, true
	}
	t, tr, err := e.breakers.admitRetry(r.c.Key, e.seconds.Time())
	r.report(tr)
	if err != nil {
		if h := e.hooks.OnBreakerReject; h != nil {
			var coe *CircuitOpenError
			errors.As(err, &coe)
			h(BreakerRejectEvent{Event: r.event(), Attempt: r.launched + 1, State: coe.State})
		}
		return t, false
	}
	return t, true
}
