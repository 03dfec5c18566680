package resilience

import (
	"errors"
	"time"
)

// Admission: the breaker, the concurrency limit and the budget decide
// whether a call, and each further attempt, may go ahead. Refusals fire
// their hooks here.

// admit finds the call's host and asks its breaker to admit the call; it
// reports false with the call's result when the call ends here. A probe's
// ticket is held from the moment the breaker issues it: the caller
// (execute) arms unwindProbe for it before anything that may panic runs.
func (r *run[T]) admit() (ticket, transition, Result[T], bool) {
	e, c := r.e, r.c
	var (
		tk ticket
		tr transition
	)
	if e.hosts != nil && c.Key != "" {
		if r.host = e.hosts.get(c.Key, e.seconds.Time()); r.host == nil {
			e.hosts.untrackedCall()
		}
	}
	if e.breakers != nil && c.Key != "" {
		t, trn, err := e.breakers.allow(r.host, c.Key, e.seconds.Time(), true)
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

// prepare reports the breaker's transition of admit (tr), takes the first
// attempt's permit of the concurrency limit into tk (before anything is
// read of the request, so a shed call costs nothing) and lets the
// operation prepare the call; it reports false with the call's result when
// the call ends here. A permit taken is held (permitHeld) until the first
// attempt takes it over: the caller arms unwindPermit for it.
func (r *run[T]) prepare(tk *ticket, tr transition) (Result[T], bool) {
	e, c := r.e, r.c
	r.report(tr)
	if l := r.limiter(); l != nil {
		if err := r.admitFirst(l); err != nil {
			r.probeHeld = false
			r.report(e.breakers.done(*tk, outcomeIgnore, e.seconds.Time()))
			return r.end(Result[T]{Err: err}, ReasonOverloaded), false
		}
		tk.lim, r.permitHeld = l, true
	}
	r.limitReason = ReasonAttemptsExhausted
	n, why, err := c.Op.Prepare(r.maxAttempts)
	if err != nil {
		r.probeHeld = false
		r.report(e.breakers.done(*tk, outcomeIgnore, e.seconds.Time()))
		r.permitHeld = false
		tk.releasePermit(time.Time{}, 0, limitIgnore)
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

// unwindPermit returns the first attempt's permit when the call is unwound
// by a panic (of a hook or Prepare) before the attempt took it over; once
// it has, the attempt returns it (see exec).
func (r *run[T]) unwindPermit(l *limiter) {
	if r.permitHeld {
		r.permitHeld = false
		l.release(time.Time{}, 0, limitIgnore)
	}
}

// limiter returns the concurrency limit the call's attempts need a permit
// of, or nil.
func (r *run[T]) limiter() *limiter {
	if r.host == nil {
		return nil
	}
	return r.host.lim
}

// admitFirst takes a permit for the call's first attempt, waiting for one
// if the limit allows (see ConcurrencyLimit.MaxWait), or returns the
// *OverloadError the call ends with.
func (r *run[T]) admitFirst(l *limiter) error {
	p := &r.c.Policy
	if p.NoLimit {
		l.force()
		return nil
	}
	ok, waited := l.acquire(r.parent, p.Criticality, r.e.clock)
	if ok {
		if h := r.e.hooks.OnLimitWait; h != nil && waited > 0 {
			h(LimitWaitEvent{Event: r.event(), Criticality: p.Criticality, Limit: l.Limit(), InFlight: l.inFlight(), Waited: waited})
		}
		return nil
	}
	return r.shed(l, KindInitial, waited)
}

// admitLimit takes a permit for a retry or hedge into t; they never wait.
// It reports false, having fired OnShed, when the limit refuses.
func (r *run[T]) admitLimit(k AttemptKind, t *ticket) bool {
	l := r.limiter()
	switch {
	case l == nil:
		return true
	case r.c.Policy.NoLimit:
		l.force()
	case !l.tryAcquire(r.c.Policy.Criticality):
		_ = r.shed(l, k, 0)
		return false
	}
	t.lim = l
	return true
}

// shed counts and reports an attempt the limit refused, returning the
// error a shed call ends with.
func (r *run[T]) shed(l *limiter, k AttemptKind, waited time.Duration) error {
	l.shed.Add(1)
	lim, n := l.Limit(), l.inFlight()
	if h := r.e.hooks.OnShed; h != nil {
		h(ShedEvent{Event: r.event(), Attempt: r.launched + 1, Kind: k, Criticality: r.c.Policy.Criticality,
			Limit: lim, InFlight: n, Waited: waited})
	}
	return &OverloadError{Key: r.c.Key, Limit: lim, InFlight: n, Waited: waited}
}

// report forwards a breaker transition to the hook, in the call's context.
// Never called with a lock held.
func (r *run[T]) report(tr transition) {
	if h := r.e.hooks.OnBreakerStateChange; h != nil && tr.Changed() {
		h(BreakerStateEvent{Event: Event{Context: r.ctx, Key: tr.Key, Subject: r.c.Subject}, From: tr.From, To: tr.To})
	}
}

// admitNext asks the budget, then the breaker, then the concurrency limit,
// for one more attempt of kind k. It returns the ticket (the breaker's
// admission and the limit's permit) and the budget's token (to refund if
// the attempt does not launch after all), or the reason it was refused.
// What was taken before a refusal is given back here.
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
	if !r.admitLimit(k, &t) {
		tok.Refund()
		r.report(r.e.breakers.done(t, outcomeIgnore, r.e.seconds.Time()))
		return ticket{}, budgetToken{}, ReasonOverloaded, false
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
	t, tr, err := e.breakers.allow(r.host, r.c.Key, e.seconds.Time(), false)
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
