package resilience

import "fmt"

// How a call ends: with a winner (endWith), with what it kept or its last
// error (endWithout), and always through end, which fires OnCallEnd.

// endWith ends the call with a's non-retryable result, at a's end.
func (r *run[T]) endWith(a *attempt[T]) Result[T] {
	if r.parent.Err() != nil && a.err != nil {
		r.settle(a, AttemptCancelled, outcomeIgnore)
		return r.endWithout(ReasonCanceled, &a.end)
	}
	o, reason := AttemptSuccess, ReasonSuccess
	if a.err != nil {
		o, reason = AttemptFailure, ReasonNotRetryable
	}
	r.settle(a, o, a.outcome())
	r.release(r.retained)
	r.retained = nil
	if a.err != nil {
		r.errs.add(a.err)
		a.own.cancel(nil)
		return r.end(Result[T]{Err: r.wrap(a.err, reason)}, reason, &a.end)
	}
	if !a.verd.Overload && r.e.budget != nil { // an answer that says the server is overloaded is no success
		r.e.budget.Succeed(a.end.second(), a.adm.tok) // a retry or hedge that succeeded costs nothing (see retryBudget)
	}
	return r.end(r.resultOf(a), reason, &a.end)
}

// resultOf returns a's result, to be finished by the caller.
func (r *run[T]) resultOf(a *attempt[T]) Result[T] {
	res := Result[T]{Value: a.v, Code: a.verd.Code, Attempt: a.info.Number, Context: a.ctx, fin: Finisher{own: a.own}}
	if h := r.e.hooks.OnResultDone; h != nil {
		res.fin.done = resultDone{hook: h, ctx: a.ctx, key: r.c.Key, subject: r.c.Subject, number: a.info.Number}
	}
	return res
}

// endWithout ends the call without a winner, at in (nil: now): with the
// retained result, if any, else the last error.
func (r *run[T]) endWithout(reason EndReason, in *instant) Result[T] {
	r.decide()
	if err := r.parent.Err(); err != nil {
		r.release(r.retained)
		r.retained = nil
		return r.end(Result[T]{Err: err}, ReasonCanceled, in)
	}
	if a := r.retained; a != nil {
		r.retained = nil
		return r.end(r.resultOf(a), reason, in)
	}
	last := r.errs.last()
	if last == nil {
		last = fmt.Errorf("resilience: call gave up without a result (%s)", reason)
		if r.c.Key != "" {
			last = fmt.Errorf("resilience: %s gave up without a result (%s)", r.c.Key, reason)
		}
	}
	return r.end(Result[T]{Err: r.wrap(last, reason)}, reason, in)
}

// wrap wraps a final error in *Error when more than one attempt launched.
func (r *run[T]) wrap(err error, reason EndReason) error {
	if r.launched <= 1 {
		return err
	}
	return &Error{Attempts: r.launched, Err: err, Errs: r.errs.kept(), Omitted: r.errs.omitted, Reason: reason}
}

// end fires OnCallEnd and returns res: every way out of a call passes here.
// The call ends at in: the time of the decision that ended it (the end of
// the attempt it returns, say), or, for nil, now.
func (r *run[T]) end(res Result[T], reason EndReason, in *instant) Result[T] {
	r.decide()
	if h := r.e.hooks.OnCallEnd; h != nil {
		if in == nil {
			fresh := r.e.instant()
			in = &fresh
		}
		now := in.now()
		h(CallEndEvent{Event: r.event(), Start: r.start,
			Duration: now.Sub(r.start), Attempts: r.launched, Retries: r.retries, Hedges: r.hedges,
			Backoff: r.slept, Code: res.Code, Err: res.Err, Reason: reason, Probe: r.probe, Returned: res.Attempt})
	}
	return res
}
