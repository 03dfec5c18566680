package resilience

import "time"

// Retrying: after a retryable result the engine launches a replacement at
// once when another attempt is in flight, or waits the server's Retry-After
// or the backoff's delay, asking the budget before it sleeps.

// retry handles a retryable result: it schedules the next attempt (at once
// when another is in flight, else after the delay) or ends the call, and
// reports done with the final result when the call ends. What it decides
// on a's result it decides at a's end (a.end): the failure's second, the
// deadline, the budget, and where the delay runs from.
func (r *run[T]) retry(a *attempt[T]) (Result[T], bool) {
	// A failure to the breaker, unless a throttle (see Verdict.Throttle).
	r.settle(a, AttemptRetryable, a.outcome())
	if r.parent.Err() == nil && r.e.budget != nil { // the caller's own end is no failure of the server's
		r.e.budget.Fail(a.end.second(), a.adm.tok, timedOut(a.err))
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
	if a.verd.Pushback {
		// Retried below: nothing more launches (no retry, no hedge: see
		// armHedge and admitHedge), and what is in flight runs on.
		r.maxAttempts, r.limitReason = r.launched, ReasonPushback
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
		in := r.e.instant() // after keep, which may take a while
		if _, ok := r.admitNext(KindRetry, &r.held, &in, timedOut(a.err)); ok {
			r.onRetry(a, 0, false)
			r.launch(KindRetry, &in)
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
	if dl, ok := r.parent.Deadline(); ok && !a.end.now().Add(d).Before(dl) {
		// The retry would start at or after the deadline, when the
		// caller's context has ended: no sleep for it.
		return r.endAfter(a, ReasonPastDeadline), true
	}
	// The budget is asked before the sleep, so an exhausted budget ends the
	// call at once, and the token is refunded if the retry does not launch.
	if !r.spend(KindRetry, &r.held, &a.end, timedOut(a.err)) {
		return r.endAfter(a, ReasonBudgetExhausted), true
	}
	if !fromServer {
		r.backoffRetries++
		r.prevDelay = d
	}
	var from time.Time
	if d > 0 {
		from = a.end.now() // the delay runs from the attempt's end
	}
	keep() // the retry follows: free what a holds before sleeping
	r.onRetry(a, d, fromServer)
	in := r.e.instant() // the retry's admission: now, or the sleep's end
	if d > 0 {
		// Time spent since the attempt's end (retaining, the hooks)
		// counts against the delay.
		start := r.e.clock.Now()
		ok, woke := r.sleep(start, max(d-start.Sub(from), 0), d, fromServer)
		in = r.e.instantAt(woke)
		if !ok {
			r.giveBack(&r.held)
			return r.endWithout(ReasonCanceled, &in), true
		}
	}
	if r.pastDeadline(&in) {
		// The sleep's timer woke late, at or after the deadline: no
		// attempt starts after the caller's deadline.
		r.giveBack(&r.held)
		return r.endWithout(ReasonPastDeadline, &in), true
	}
	if !r.admitBreaker(&r.held, &in) {
		r.giveBack(&r.held)
		return r.endWithout(ReasonCircuitOpen, &in), true
	}
	if !r.admitLimit(KindRetry, &r.held) {
		r.giveBack(&r.held)
		return r.endWithout(ReasonOverloaded, &in), true
	}
	r.launch(KindRetry, &in)
	return Result[T]{}, false
}

// pastDeadline reports whether the caller's deadline has come at in: a
// retry or hedge admitted then would start after it. (The context's own
// timer may fire a little later, so its Err is not enough.)
func (r *run[T]) pastDeadline(in *instant) bool {
	dl, ok := r.parent.Deadline()
	return ok && !in.now().Before(dl)
}

// endAfter ends the call, at a's end, after a's retryable result with
// nothing else in flight: a is returned as it is (never retained), or its
// error wrapped.
func (r *run[T]) endAfter(a *attempt[T], reason EndReason) Result[T] {
	if a.err == nil {
		r.release(r.retained)
		r.retained = a
	}
	return r.endWithout(reason, &a.end)
}

func (r *run[T]) onRetry(a *attempt[T], d time.Duration, fromServer bool) {
	if h := r.e.hooks.OnRetry; h != nil {
		h(RetryEvent{Event: r.event(), Attempt: a.info.Number,
			Delay: d, FromRetryAfter: fromServer, Code: a.verd.Code, Err: a.err})
	}
}

// sleep waits wait (the part of the backoff delay d still to go), from
// start, unless the caller's context ends first; it reports whether the
// full delay passed, and the time it woke at. The hedge timer is paused
// (nothing is in flight).
func (r *run[T]) sleep(start time.Time, wait, d time.Duration, fromServer bool) (bool, time.Time) {
	r.stopHedge()
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
	woke := r.e.clock.Now()
	slept := woke.Sub(start)
	if ok {
		slept = max(slept, wait)
	}
	r.slept += slept
	if h := r.e.hooks.OnBackoff; h != nil {
		h(BackoffEvent{Event: r.event(), Retry: r.retries + 1,
			Start: start, Delay: d, Slept: slept, FromRetryAfter: fromServer, Interrupted: !ok})
	}
	return ok, woke
}
