package resilience

import (
	"errors"
	"time"
)

// Admission: the breaker, the concurrency limit and the budget decide
// whether a call, and each further attempt, may go ahead. Refusals fire
// their hooks here.

// admission is what one attempt takes before it launches: the budget's
// token (a retry or a hedge), adaptive hedging's token (a hedge), the
// breaker's ticket (a probe slot, when half-open) and the concurrency
// limit's permit. Every step of an admission stores what it took here
// before any hook can run, so that at every moment the admission says
// exactly what is held, and one function gives it all back (giveBack):
// on a refusal, when the attempt does not launch after all (an interrupted
// backoff sleep, a hedge the caller's answer made needless), and when a
// hook or the operation panics (unwind, and the hedge timer's recover).
// Launching hands the admission to the attempt (attempt.adm) and spends
// its tokens; from then on one function gives back what the attempt still
// holds (giveBackAfter): its permit as its result is known (exec, or exec's
// unwinding when Do or a hook panics), and its breaker ticket when the call
// settles it (settle, for a result taken or dropped late) or, for a probe
// whose attempt panicked, as exec unwinds.
//
// The admission being taken for the call's next attempt is run.held, which
// only the goroutine driving the call touches; the hedge timer's goroutine
// admits a hedge into an admission of its own (see hedgeFired).
type admission struct {
	ticket             // the breaker's ticket (zero: no breaker, or an untracked key)
	lim    *limiter    // the concurrency limit a permit was taken from (nil: none)
	tok    budgetToken // the budget's token
	hk     *hedgeKey   // the adaptive hedging state a token was taken from
}

// giveBack returns everything ad holds and clears it. It fires no hook
// but OnBreakerStateChange, and a ticket returned unused changes no
// breaker's state, so it never runs user code while ad is half-released.
func (r *run[T]) giveBack(ad *admission) {
	tok, hk := ad.tok, ad.hk
	ad.tok, ad.hk = budgetToken{}, nil
	tok.Refund()
	if hk != nil {
		hk.untake()
	}
	in := r.e.instant() // never read: an ignored result teaches nothing
	r.giveBackHeld(ad, &in, 0, limitIgnore, outcomeIgnore)
}

// giveBackAfter gives back what the launched attempt a still holds of its
// admission (see admission), at a's end: its permit, teaching the limit
// res for a's latency; and, once its result is settled (bo is not
// outcomeNone), its breaker ticket, reporting bo. A part already given
// back is not given again.
func (r *run[T]) giveBackAfter(a *attempt[T], res limitResult, bo outcome) {
	r.giveBackHeld(&a.adm, &a.end, a.dur, res, bo)
}

// outcomeNone, to giveBackAfter: the result is not settled yet, so the
// ticket stays held.
const outcomeNone outcome = -1

// giveBackHeld returns ad's permit with res (for a latency of d, at in)
// and, unless bo is outcomeNone, its breaker ticket with bo; it clears
// what it returned. A ticket given back with an ignored outcome changes no
// breaker's state, so no hook runs; nor does one read in's time.
func (r *run[T]) giveBackHeld(ad *admission, in *instant, d time.Duration, res limitResult, bo outcome) {
	if l := ad.lim; l != nil {
		ad.lim = nil
		l.release(in, d, res)
	}
	if t := ad.ticket; t.b != nil && bo != outcomeNone {
		ad.ticket = ticket{}
		r.report(r.e.breakers.done(t, bo, in))
	}
}

// unwind runs as a call returns or is unwound by a panic (of a hook,
// Prepare, Do or Classify, which propagate): it gives back the admission
// the call was taking (run.held); what an attempt took exec gives back as
// it unwinds (see giveBackAfter). Without it a panic would leave the limit
// a permit smaller, or a half-open breaker counting a probe in flight
// forever and rejecting every later request. On a call that returns
// normally it finds nothing held.
func (r *run[T]) unwind() {
	if r.lingering && r.handedOff() {
		return // a driver took the call over: what it holds is its own to give back (see drive)
	}
	if r.held != (admission{}) {
		r.giveBack(&r.held)
	}
}

// admit finds the call's host and asks its breaker to admit the call into
// r.held, at in (the admission's time); it reports false with the call's
// result when the call ends here.
func (r *run[T]) admit(in *instant) (transition, Result[T], bool) {
	e, c := r.e, r.c
	var tr transition
	if e.hosts != nil {
		if r.host = e.hosts.get(c.Key, in); r.host == nil {
			e.hosts.untrackedCall()
		}
	}
	if e.breakers != nil {
		t, trn, err := e.breakers.allow(r.host, c.Key, in, true)
		if err != nil {
			r.report(trn)
			if h := e.hooks.OnBreakerReject; h != nil {
				var coe *CircuitOpenError
				errors.As(err, &coe)
				h(BreakerRejectEvent{Event: r.event(), State: coe.State})
			}
			return transition{}, r.end(Result[T]{Err: err}, ReasonCircuitOpen, in), false
		}
		r.held.ticket, tr = t, trn
	}
	if r.held.probe {
		r.probe = true
		r.maxAttempts = 1
	}
	return tr, Result[T]{}, true
}

// prepare reports the breaker's transition of admit (tr), takes the first
// attempt's permit of the concurrency limit into r.held at in (the
// admission's time; before anything is read of the request, so a shed call
// costs nothing) and lets the operation prepare the call; it reports false
// with the call's result when the call ends here, having given back what
// it held.
func (r *run[T]) prepare(tr transition, in *instant) (Result[T], bool) {
	c := r.c
	r.report(tr)
	if l := r.limiter(); l != nil {
		if err := r.admitFirst(l, in); err != nil {
			r.giveBack(&r.held)
			return r.end(Result[T]{Err: err}, ReasonOverloaded, nil), false
		}
	}
	r.limitReason = ReasonAttemptsExhausted
	n, why, err := c.Op.Prepare(r.maxAttempts)
	if err != nil {
		r.giveBack(&r.held)
		return r.end(Result[T]{Err: err}, ReasonNotRetryable, nil), false
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

// limiter returns the concurrency limit the call's attempts need a permit
// of, or nil.
func (r *run[T]) limiter() *limiter {
	if r.host == nil {
		return nil
	}
	return r.host.lim
}

// admitFirst takes a permit for the call's first attempt into r.held,
// waiting for one from in if the limit allows (see ConcurrencyLimit.MaxWait),
// or returns the *OverloadError the call ends with.
func (r *run[T]) admitFirst(l *limiter, in *instant) error {
	p := &r.c.Policy
	if p.NoLimit {
		l.force()
		r.held.lim = l
		return nil
	}
	ok, waited := l.acquire(r.parent, p.Criticality, in)
	if ok {
		r.held.lim = l // held before OnLimitWait can run
		if h := r.e.hooks.OnLimitWait; h != nil && waited > 0 {
			h(LimitWaitEvent{Event: r.event(), Criticality: p.Criticality, Limit: l.Limit(), InFlight: l.inFlight(), Waited: waited})
		}
		return nil
	}
	return r.shed(l, KindInitial, waited)
}

// admitLimit takes a permit for a retry or hedge into ad; they never wait.
// It reports false, having fired OnShed, when the limit refuses.
func (r *run[T]) admitLimit(k AttemptKind, ad *admission) bool {
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
	ad.lim = l
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

// admitNext asks the deadline, the budget, then the breaker, then the
// concurrency limit, for one more attempt of kind k at in (the admission's
// time), taking what each grants into ad: none starts after the caller's
// deadline. It reports the reason when one refuses, having given back all
// of ad.
func (r *run[T]) admitNext(k AttemptKind, ad *admission, in *instant, afterTimeout bool) (EndReason, bool) {
	if !r.pastDeadline(in) && !r.spend(k, ad, in, afterTimeout) {
		r.giveBack(ad) // (what a hedge's admission took of adaptive hedging's)
		return ReasonBudgetExhausted, false
	}
	return r.admitRest(k, ad, in, true)
}

// admitRest asks the deadline, then the breaker, then the concurrency
// limit, for an attempt of kind k at in whose budget token ad holds
// already (none is needed when the budget is off), unless the caller's
// context ended (live false); a refusal gives back all of ad and reports
// the reason the call ends with.
func (r *run[T]) admitRest(k AttemptKind, ad *admission, in *instant, live bool) (EndReason, bool) {
	var reason EndReason
	switch {
	case !live:
		reason = ReasonCanceled
	case r.pastDeadline(in): // (a sleep's timer may wake late, at or after the deadline)
		reason = ReasonPastDeadline
	case !r.admitBreaker(ad, in):
		reason = ReasonCircuitOpen
	case !r.admitLimit(k, ad):
		reason = ReasonOverloaded
	default:
		return 0, true
	}
	r.giveBack(ad)
	return reason, false
}

// spend takes one token from the budget into ad for an attempt of kind k
// at in, reporting a refusal to OnBudgetExhausted; a retry after a timeout
// (afterTimeout) is paid by the reserve alone (see retryBudget).
func (r *run[T]) spend(k AttemptKind, ad *admission, in *instant, afterTimeout bool) bool {
	if r.e.budget == nil {
		return true // no budget: no time to read
	}
	tok, ok := r.e.budget.take(in.second(), afterTimeout)
	if !ok {
		if h := r.e.hooks.OnBudgetExhausted; h != nil {
			h(BudgetEvent{Event: r.event(), Attempt: r.launched + 1, Kind: k})
		}
		return false
	}
	ad.tok = tok
	return true
}

// admitBreaker asks the breaker to admit one more attempt into ad at in,
// reporting a refusal to OnBreakerReject.
func (r *run[T]) admitBreaker(ad *admission, in *instant) bool {
	e := r.e
	if e.breakers == nil {
		return true
	}
	t, tr, err := e.breakers.allow(r.host, r.c.Key, in, false)
	if err == nil {
		ad.ticket = t
	}
	r.report(tr)
	if err != nil {
		if h := e.hooks.OnBreakerReject; h != nil {
			var coe *CircuitOpenError
			errors.As(err, &coe)
			h(BreakerRejectEvent{Event: r.event(), Attempt: r.launched + 1, State: coe.State})
		}
		return false
	}
	return true
}
