package resilience

import "errors"

// Admission: the breaker and the budget decide whether a call, and each
// further attempt, may go ahead. Refusals fire their hooks here.

// admit asks the breaker to admit the call and lets the operation prepare
// it; it reports false with the call's result when the call ends here.
func (r *run[T]) admit() (ticket, Result[T], bool) {
	e, c := r.e, r.c
	var tk ticket
	if e.breakers != nil && c.Key != "" {
		t, tr, err := e.breakers.admit(c.Key, e.seconds.Time())
		r.report(tr)
		if err != nil {
			if h := e.hooks.OnBreakerReject; h != nil {
				var coe *CircuitOpenError
				errors.As(err, &coe)
				h(BreakerRejectEvent{Event: r.event(), State: coe.State})
			}
			return ticket{}, r.end(Result[T]{Err: err}, ReasonCircuitOpen), false
		}
		tk = t
	}
	if tk.Probe() {
		r.probe = true
		r.maxAttempts = 1
	}
	r.limitReason = ReasonAttemptsExhausted
	n, why, err := c.Op.Prepare(r.maxAttempts)
	if err != nil {
		r.report(e.breakers.done(tk, outcomeIgnore, e.seconds.Time()))
		return ticket{}, r.end(Result[T]{Err: err}, ReasonNotRetryable), false
	}
	if n < r.maxAttempts {
		r.maxAttempts = max(1, n)
		r.limitReason = why
	}
	if r.probe {
		r.limitReason = ReasonCircuitOpen
	}
	return tk, Result[T]{}, true
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
