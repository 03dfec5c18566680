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
func (r *run[T]) retry(a *attempt[T]) (res Result[T], done bool) {
	r.failed(a)
	reason, more := r.mayRetry(a)
	switch {
	case !more && (reason == ReasonCanceled || r.inflight == 0):
		return r.endAfter(a, reason), true // (endWithout releases a)
	case r.inflight > 0:
		// Another attempt is still running: a waits beside it, and is
		// replaced at once if another attempt may follow.
		r.keep(a)
		if more {
			r.replace(a)
		}
		return Result[T]{}, false
	}
	return r.retryAfterDelay(a)
}

// failed records a's retryable result: a failure to its breaker (unless a
// throttle: see Verdict.Throttle), to the budget (unless the caller's own
// end caused it: that is no failure of the server's), and its error.
func (r *run[T]) failed(a *attempt[T]) {
	r.settle(a, AttemptRetryable, a.outcome())
	if r.parent.Err() == nil && r.e.budget != nil {
		r.e.budget.Fail(a.end.second(), a.adm.tok, timedOut(a.err))
	}
	if a.err != nil {
		r.errs.add(a.err)
		a.own.cancel(nil)
	}
}

// mayRetry reports whether another attempt may follow a's retryable
// result or, when none may, the reason the call ends with once nothing
// else is in flight.
func (r *run[T]) mayRetry(a *attempt[T]) (EndReason, bool) {
	if r.parent.Err() != nil {
		return ReasonCanceled, false
	}
	if a.verd.Pushback {
		// Retried below: nothing more launches (no retry, no hedge: see
		// armHedge and admitHedge), and what is in flight runs on.
		r.maxAttempts, r.limitReason = r.launched, ReasonPushback
	}
	switch {
	case a.verd.NotIdempotent:
		return ReasonNotIdempotent, false
	case r.launched >= r.maxAttempts:
		return r.limitReason, false
	}
	return 0, true
}

// keep keeps a's result, superseded for now, in case the call gives up.
func (r *run[T]) keep(a *attempt[T]) {
	if a.err == nil {
		r.retain(a)
	}
}

// replace launches a retry of a at once, beside the attempts still in
// flight, if it is admitted now.
func (r *run[T]) replace(a *attempt[T]) {
	in := r.e.instant() // after keep, which may take a while
	if _, ok := r.admitNext(KindRetry, &r.held, &in, timedOut(a.err)); ok {
		r.onRetry(a, 0, false)
		r.launch(KindRetry, &in)
	}
}

// retryAfterDelay launches a retry of a after its delay, with nothing else
// in flight, or ends the call. The budget is asked before the sleep, so an
// exhausted budget ends the call at once, and the token is given back if
// the retry does not launch; the deadline, the breaker and the limit are
// asked as it launches.
func (r *run[T]) retryAfterDelay(a *attempt[T]) (Result[T], bool) {
	d, fromServer, reason, ok := r.delayFor(a)
	if ok && !r.spend(KindRetry, &r.held, &a.end, timedOut(a.err)) {
		reason, ok = ReasonBudgetExhausted, false
	}
	if !ok {
		return r.endAfter(a, reason), true
	}
	if !fromServer {
		r.backoffRetries++
		r.prevDelay = d
	}
	var from time.Time
	if d > 0 {
		from = a.end.now() // the delay runs from the attempt's end
	}
	r.keep(a) // the retry follows: free what a holds before sleeping
	r.onRetry(a, d, fromServer)
	in, slept := r.pause(from, d, fromServer)
	if reason, ok = r.admitRest(KindRetry, &r.held, &in, slept); !ok {
		return r.endWithout(reason, &in), true
	}
	r.launch(KindRetry, &in)
	return Result[T]{}, false
}

// delayFor returns the delay before the retry that follows a (the
// server's Retry-After, or the backoff's), or the reason the call ends
// instead: a Retry-After beyond MaxRetryAfter, or a retry that would start
// at or after the caller's deadline, when its context has ended (no sleep
// for it).
func (r *run[T]) delayFor(a *attempt[T]) (d time.Duration, fromServer bool, reason EndReason, ok bool) {
	p := &r.c.Policy
	fromServer = a.verd.HasRetryAfter
	switch {
	case fromServer:
		d = max(a.verd.RetryAfter, 0)
		if d > max(p.MaxRetryAfter, 0) { // Off: only a zero delay
			return 0, false, ReasonRetryAfterTooLong, false
		}
	case p.Backoff != nil:
		d = clampDelay(p.Backoff.Delay(r.backoffRetries+1, r.prevDelay))
	}
	if dl, ok := r.parent.Deadline(); ok && !a.end.now().Add(d).Before(dl) {
		return 0, false, ReasonPastDeadline, false
	}
	return d, fromServer, 0, true
}

// pause waits out the delay d before a retry (time spent since from, the
// attempt's end, retaining and in the hooks, counts against it) and returns
// the retry's admission: now, or the sleep's end. slept is false when the
// caller's context ended first.
func (r *run[T]) pause(from time.Time, d time.Duration, fromServer bool) (in instant, slept bool) {
	in = r.e.instant()
	if d <= 0 {
		return in, true
	}
	start := in.now()
	slept, in = r.sleep(start, max(d-start.Sub(from), 0), d, fromServer)
	return in, slept
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
// full delay passed, and the instant it woke at. The hedge timer is paused
// (nothing is in flight).
func (r *run[T]) sleep(start time.Time, wait, d time.Duration, fromServer bool) (bool, instant) {
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
	woke := r.e.instant()
	slept := woke.now().Sub(start)
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
