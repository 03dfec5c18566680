package resilience

import "time"

// Retrying: after a retryable result the engine launches a replacement at
// once when another attempt is in flight, or waits the server's Retry-After
// or the backoff's delay, asking the budget before it sleeps.

// retry handles a retryable result: it schedules the next attempt (at once
// when another is in flight, else after the delay) or ends the call, and
// reports done with the final result when the call ends.
func (r *run[T]) retry(a *attempt[T]) (Result[T], bool) {
	r.settle(a, AttemptRetryable, outcomeFailure)
	if r.parent.Err() == nil { // the caller's own end is no failure of the server's
		r.e.budget.Fail(r.e.seconds.Time(), timedOut(a.err))
	}
	if a.err != nil {
		r.errs.add(a.err)
		a.own.cancel(nil)
	}
	keep := func() { // a is superseded for now, but may still be returned
		if a.err == nil {
			r.retain(a)
		}
	}
	if r.parent.Err() != nil {
		return r.endAfter(a, ReasonCanceled), true // endWithout releases a
	}
	if r.launched >= r.maxAttempts || a.verd.NotIdempotent {
		if r.inflight > 0 {
			keep()
			return Result[T]{}, false
		}
		if a.verd.NotIdempotent {
			return r.endAfter(a, ReasonNotIdempotent), true
		}
		return r.endAfter(a, r.limitReason), true
	}
	if r.inflight > 0 {
		// Another attempt is still running: replace this one at once.
		keep()
		if _, ok := r.admitNext(KindRetry, &r.held); ok {
			r.onRetry(a, 0, false)
			r.launch(KindRetry)
		}
		return Result[T]{}, false
	}

	delay, fromServer := r.c.Policy.Backoff, a.verd.HasRetryAfter
	var d time.Duration
	if fromServer {
		d = max(a.verd.RetryAfter, 0)
		if r.c.Policy.MaxRetryAfter >= 0 && d > r.c.Policy.MaxRetryAfter {
			return r.endAfter(a, ReasonRetryAfterTooLong), true
		}
	} else if delay != nil {
		d = clampDelay(delay.Delay(r.backoffRetries+1, r.prevDelay))
	}
	now := r.e.clock.Now()
	if dl, ok := r.parent.Deadline(); ok && now.Add(d).After(dl) {
		return r.endAfter(a, ReasonPastDeadline), true
	}
	// The budget is asked before the sleep, so an exhausted budget ends the
	// call at once, and the token is refunded if the retry does not launch.
	if !r.spend(KindRetry, &r.held) {
		return r.endAfter(a, ReasonBudgetExhausted), true
	}
	if !fromServer {
		r.backoffRetries++
		r.prevDelay = d
	}
	keep() // the retry follows: free what a holds before sleeping
	r.onRetry(a, d, fromServer)
	if d > 0 {
		// Time spent retaining counts against the delay.
		rest := d - r.e.clock.Now().Sub(now)
		if !r.sleep(max(rest, 0), d, fromServer) {
			r.giveBack(&r.held)
			return r.endWithout(ReasonCanceled), true
		}
	}
	if !r.admitBreaker(&r.held) {
		r.giveBack(&r.held)
		return r.endWithout(ReasonCircuitOpen), true
	}
	if !r.admitLimit(KindRetry, &r.held) {
		r.giveBack(&r.held)
		return r.endWithout(ReasonOverloaded), true
	}
	r.launch(KindRetry)
	return Result[T]{}, false
}

// endAfter ends the call after a's retryable result with nothing else in
// flight: a is returned as it is (never retained), or its error wrapped.
func (r *run[T]) endAfter(a *attempt[T], reason EndReason) Result[T] {
	if a.err == nil {
		r.release(r.retained)
		r.retained = a
	}
	return r.endWithout(reason)
}

func (r *run[T]) onRetry(a *attempt[T], d time.Duration, fromServer bool) {
	if h := r.e.hooks.OnRetry; h != nil {
		h(RetryEvent{Event: r.event(), Attempt: a.info.Number,
			Delay: d, FromRetryAfter: fromServer, Code: a.verd.Code, Err: a.err})
	}
}

// sleep waits wait (the part of the backoff delay d still to go) unless the
// caller's context ends first; it reports whether the full delay passed. The
// hedge timer is paused (nothing is in flight).
func (r *run[T]) sleep(wait, d time.Duration, fromServer bool) bool {
	r.stopHedge()
	start := r.e.clock.Now()
	ok := true
	if wait > 0 {
		t := r.e.clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-r.parent.Done():
			t.Stop()
			ok = false
		}
	} else {
		ok = r.parent.Err() == nil
	}
	slept := r.e.clock.Now().Sub(start)
	if ok {
		slept = max(slept, wait)
	}
	r.slept += slept
	if h := r.e.hooks.OnBackoff; h != nil {
		h(BackoffEvent{Event: r.event(), Retry: r.retries + 1,
			Start: start, Delay: d, Slept: slept, FromRetryAfter: fromServer, Interrupted: !ok})
	}
	return ok
}
