package resilience

import (
	"context"
	"errors"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Hedging, in two phases, for a call whose Operation cancels promptly (see
// prompt; any other hedging call runs every attempt on a goroutine of its
// own, with the caller driving).
//
// Until a hedge fires, a hedging call costs what a sequential one does: the
// caller's goroutine runs each attempt itself ("inline"), with a pooled
// AfterFunc timer armed for the hedge delay. An attempt that answers first
// stops the timer, and the call goes on as a sequential call would: no
// goroutine, no channel, nothing but the timer's Stop.
//
// When the timer fires while the caller is still in its attempt, the
// timer's goroutine takes the call over (hedgeFired): it launches the hedge
// and runs the call's loop from then on, as the driver, with every further
// attempt on a goroutine of its own and the hedge timer a channel timer the
// loop waits on. The caller's attempt becomes one of the attempts in flight:
// when it returns, the caller hands its result to the driver like any other
// attempt (finish), and waits for the call's result (awaitFinal). A hedge
// that wins cancels the caller's attempt, so the caller returns as soon as
// the base honours its context, as http.Transport does.
//
// Exactly one goroutine drives a call at any time: the caller until a hedge
// fires, then the driver. The handover happens under mu, and the caller
// touches no call state between the handover and the driver's result.

// errCallerPanicked stands, for the driver, for a panic of the caller's own
// attempt: the caller re-panics with the real value on its own goroutine.
var errCallerPanicked = errors.New("resilience: the caller's attempt panicked")

// runInline runs attempt a on the caller's goroutine (hedging mode, before
// any hedge fired), with the hedge timer armed if a hedge could follow it.
// It reports whether the call was handed over to a driver meanwhile; the
// caller then waits for the driver's result.
func (r *run[T]) runInline(ctx context.Context, a *attempt[T]) bool {
	if r.armInline(a) == nil { // the last attempt the call may make: no hedge can follow
		r.exec(ctx, a)
		r.ready = a
		return false
	}
	returned := false
	defer func() {
		if !returned {
			r.inlinePanicked(a)
		}
	}()
	r.exec(ctx, a) // calls inlineReturned as soon as Do returns
	returned = true
	if !a.handed {
		r.ready = a
		return false
	}
	r.finish(ctx, a)
	return true
}

// inlineReturned runs as the inline attempt a's Do returns: it disarms the
// hedge timer and settles whether its callback took the call over
// (a.handed). From here on no callback touches a.
func (r *run[T]) inlineReturned(a *attempt[T]) {
	ht := a.ht
	a.ht = nil
	if ht.stop() { // answered within the delay: no hedge, nobody else involved
		if r.lingering { // an earlier timer's callback may still look
			r.mu.Lock()
			r.inline, r.ht = nil, nil
			r.mu.Unlock()
		} else {
			r.inline, r.ht = nil, nil
		}
		ht.r = nil
		r.spareHT = ht // for the call's next inline attempt, or the run's next call
		return
	}
	// The timer fired: its callback has taken the call over, or finds it
	// back in the caller's hands and leaves (the timer is no longer r.ht).
	// Either way it may still touch r, so r is not pooled.
	r.mu.Lock()
	r.inline = nil
	r.waitAdmission()
	if r.ht == ht {
		r.ht = nil
	}
	r.lingering = true
	a.handed = r.concurrent
	p := r.hedgePanic
	r.hedgePanic = nil
	r.mu.Unlock()
	if p != nil {
		// A hook panicked while the timer's goroutine admitted a hedge
		// (see hedgeFired): the call ends here with that panic, on the
		// caller's goroutine. The attempt is cancelled and released first;
		// exec's deferred unwound returns its permit.
		if a.timer != nil {
			a.timer.stop()
		}
		r.release(a)
		panic(p.value)
	}
}

// armInline arms a hedge timer for the inline attempt a, unless a is the
// last attempt the call may make.
func (r *run[T]) armInline(a *attempt[T]) *hedgeTimer[T] {
	if r.launched >= r.maxAttempts {
		return nil
	}
	ht := r.spareHT
	if ht == nil {
		ht = new(hedgeTimer[T])
	}
	r.spareHT = nil
	ht.r = r
	a.ht = ht
	a.lateTimeout = r.c.Policy.PerAttemptTimeout > r.hedgeDelay
	if r.lingering {
		// A callback of an earlier timer that fired may still look (and
		// find itself stale): publish under mu.
		r.mu.Lock()
		r.inline, r.ht = a, ht
		r.mu.Unlock()
	} else {
		// No timer of this call ever fired, so no other goroutine knows r;
		// arming ht publishes these to its callback (arming a timer
		// orders the two).
		r.inline, r.ht = a, ht
	}
	ht.arm(r.e.clock, r.hedgeDelay)
	return ht
}

// inlinePanicked runs while the caller's inline attempt panics: a driver,
// if the call has one, is told (it ends the call), and the panic goes on.
func (r *run[T]) inlinePanicked(a *attempt[T]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inline = nil
	r.waitAdmission()
	if r.ht != nil {
		r.ht.stop()
		r.ht = nil
	}
	if a.timer != nil { // armed late by the hedge timer's callback
		a.timer.stop()
	}
	r.lingering = true
	if r.concurrent && !r.decided {
		a.panicked = &attemptPanic{value: errCallerPanicked}
		r.done = append(r.done, a)
		r.signal()
	}
}

// hedgeFired runs on the hedge timer's goroutine when the delay passed. If
// the caller is still in its attempt and a hedge may launch, this goroutine
// takes the call over and drives it to its end.
func (r *run[T]) hedgeFired(ht *hedgeTimer[T]) {
	r.mu.Lock()
	if r.ht != ht || r.inline == nil || r.decided {
		r.mu.Unlock() // stale: the attempt answered first
		return
	}
	if a := r.inline; a.lateTimeout {
		// The attempt outlived the hedge delay: its timeout runs from here
		// for the rest of its length (see attempt.ht). The caller stops it
		// when the attempt returns, after inlineReturned.
		a.timer = r.e.armTimeout(r.c.Policy.PerAttemptTimeout-r.hedgeDelay, &a.own)
	}
	// The hedge's admission fires hooks, so it runs with no lock held;
	// meanwhile a caller whose attempt returns waits for it (admitting).
	// A hook that panics here, on the timer's goroutine, must not kill the
	// process: the panic is recovered, what was taken given back, and the
	// caller re-panics with it when its attempt returns (inlineReturned).
	r.ht = nil
	r.admitting = true
	if r.cond.L == nil {
		r.cond.L = &r.mu
	}
	r.mu.Unlock()
	var ad admission
	in := r.e.instant() // the hedge's admission
	ok, p := r.admitHedgeRecovering(&ad, &in)
	r.mu.Lock()
	r.admitting = false
	r.cond.Broadcast()
	if p != nil {
		r.hedgePanic = p
	}
	if !ok || r.inline == nil {
		// Refused (the call goes on unhedged, as after a refusal in the
		// loop), or the caller's attempt answered meanwhile: no handover.
		r.mu.Unlock()
		r.giveBack(&ad)
		return
	}
	r.goConcurrent()
	r.finished = make(chan struct{})
	r.active = append(r.active, r.inline)
	r.mu.Unlock()
	r.drive(ad, &in)
}

// admitHedgeRecovering is admitHedge on the hedge timer's goroutine: a
// panic of a hook is recovered, having given back what ad held, and
// returned for the caller's goroutine to re-raise.
func (r *run[T]) admitHedgeRecovering(ad *admission, in *instant) (ok bool, p *attemptPanic) {
	defer func() {
		if v := recover(); v != nil {
			r.giveBack(ad)
			ok, p = false, &attemptPanic{value: v}
		}
	}()
	return r.admitHedge(ad, in), nil
}

// waitAdmission waits, under mu, until no hedge is being admitted.
func (r *run[T]) waitAdmission() {
	for r.admitting {
		r.cond.Wait()
	}
}

// goConcurrent switches the call to attempts on goroutines of their own,
// reporting to a driver through done and wake. (Under mu, or before any
// other goroutine knows r.)
func (r *run[T]) goConcurrent() {
	r.concurrent = true
	r.wake = make(chan struct{}, 1)
	r.active = r.activeBuf[:0]
	r.done = r.doneBuf[:0]
}

// drive runs the call from a hedge timer's goroutine: it launches the hedge
// admitted into ad at in, then loops until the call ends, and hands the
// result (or a panic) to the caller. From here this goroutine drives the
// call, so r.held is its own; a panic gives back what it holds.
func (r *run[T]) drive(ad admission, in *instant) {
	defer func() {
		if p := recover(); p != nil {
			r.giveBack(&r.held)
			r.finalPanic = &attemptPanic{value: p}
			r.decide()
		}
		close(r.finished)
	}()
	r.held = ad
	r.launchHedge(in)
	r.final = r.loop(false)
}

// awaitFinal waits for the driver's result (the caller, after a handover).
// The wait is bounded: the driver ends the call when the caller's context
// ends.
func (r *run[T]) awaitFinal() Result[T] {
	<-r.finished
	if p := r.finalPanic; p != nil {
		if err, ok := p.value.(error); !ok || !errors.Is(err, errCallerPanicked) {
			panic(p.value)
		}
	}
	return r.final
}

// background runs an attempt on its own goroutine (after a handover) and
// hands the result to the driver, or releases it if the call is over.
func (r *run[T]) background(ctx context.Context, a *attempt[T]) {
	func() {
		// A panic in Do, Classify or a hook on this goroutine is handed to
		// the driver, which re-panics with it on the caller's goroutine.
		defer func() {
			if p := recover(); p != nil {
				a.panicked = &attemptPanic{value: p}
			}
		}()
		r.exec(ctx, a)
	}()
	r.finish(ctx, a)
}

// finish hands a finished attempt to the driver (after a handover), or
// releases it if the call is already decided.
func (r *run[T]) finish(ctx context.Context, a *attempt[T]) {
	if a.panicked == nil && a.verd.Retryable && a.err == nil && ctx.Err() == nil {
		// Another attempt is in flight or may follow: free the connection
		// now, here, so the driver never waits on this body. Bounded by
		// ctx, which is cancelled if the call is decided meanwhile.
		a.v, a.kept = r.c.Op.Retain(ctx, a.v), true
	}
	r.mu.Lock()
	if !r.decided {
		r.done = append(r.done, a)
		r.mu.Unlock()
		r.signal()
		return
	}
	r.mu.Unlock()
	r.releaseLateAlone(a)
}

// releaseLateAlone is releaseLate on an attempt's own goroutine after the
// call was decided: its caller may have returned, so a panic of
// OnAttemptEnd here has no goroutine left to reach and would kill the
// process. It is recovered and dropped (see Hooks); what the attempt held
// was returned before the hook ran.
func (r *run[T]) releaseLateAlone(a *attempt[T]) {
	defer func() { _ = recover() }()
	r.releaseLate(a)
}

// take takes the oldest finished attempt off both lists (hedging mode), or
// returns nil when none is waiting.
func (r *run[T]) take() *attempt[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.done) == 0 {
		return nil
	}
	a := r.done[0]
	n := copy(r.done, r.done[1:])
	r.done[n] = nil
	r.done = r.done[:n]
	for i, x := range r.active {
		if x == a {
			n := copy(r.active[i:], r.active[i+1:])
			r.active[i+n] = nil
			r.active = r.active[:i+n]
			break
		}
	}
	return a
}

// signal wakes the driver; a signal already pending is enough.
func (r *run[T]) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// armHedge (re)arms the driver's hedge timer when another hedge could
// launch (after a handover).
func (r *run[T]) armHedge() {
	if !r.concurrent || r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
		r.stopHedge()
		return
	}
	if r.timer == nil {
		if t, ok := r.e.timers.Get().(clock.Timer); ok {
			t.Reset(r.hedgeDelay)
			r.timer = t
			return
		}
		r.timer = r.e.clock.NewTimer(r.hedgeDelay)
		return
	}
	r.timer.Stop()
	r.timer.Reset(r.hedgeDelay)
}

// stopHedge disarms the driver's hedge timer and returns it to the pool.
// With Go 1.23+ timer semantics (and the fake clock's), a stopped timer
// delivers no stale value, so a pooled timer is as good as a new one.
func (r *run[T]) stopHedge() {
	if r.timer != nil {
		r.timer.Stop()
		r.e.timers.Put(r.timer)
		r.timer = nil
	}
}

// hedge launches a hedge if the limits allow it (the driver, when its
// timer fires).
func (r *run[T]) hedge() {
	in := r.e.instant()
	if r.admitHedge(&r.held, &in) {
		r.launchHedge(&in)
	}
}

// admitHedge reports whether a hedge may launch at in, having taken its
// admission into ad: within the limits, adaptive hedging's cap, the
// budget and the breaker. A refusal gives back what was taken and does not
// re-arm the timer: the next launch does.
func (r *run[T]) admitHedge(ad *admission, in *instant) bool {
	if r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
		return false
	}
	if r.hk != nil {
		if !r.hk.take() {
			r.hk.capped.Add(1) // the key's hard cap on extra load: no hedge now
			return false
		}
		ad.hk = r.hk
	}
	_, ok := r.admitNext(KindHedge, ad, in, false)
	return ok
}

// launchHedge reports and launches the hedge admitted into r.held at in.
func (r *run[T]) launchHedge(in *instant) {
	if h := r.e.hooks.OnHedge; h != nil {
		h(HedgeEvent{Event: r.event(), Attempt: r.launched + 1, InFlight: r.inflight + 1,
			Delay: r.hedgeDelay, Adaptive: r.hk != nil})
	}
	r.launch(KindHedge, in)
}

// decide marks the call decided, cancels the attempts in flight and releases
// results that arrived but were not read. Attempts finishing later release
// themselves.
func (r *run[T]) decide() {
	r.stopHedge()
	if !r.concurrent {
		return
	}
	r.mu.Lock()
	if r.decided {
		r.mu.Unlock()
		return
	}
	r.decided = true
	active, late := r.active, r.done
	r.active, r.done = nil, nil
	r.mu.Unlock()
	for _, a := range active {
		a.own.cancel(ErrAttemptLost)
	}
	for _, a := range late {
		r.releaseLate(a)
	}
}

// releaseLate releases an attempt that finished after the call was decided
// and settles it as cancelled.
func (r *run[T]) releaseLate(a *attempt[T]) {
	if a.panicked != nil { // nothing of its result is known; the panic is the caller's
		a.own.cancel(ErrAttemptLost)
		return
	}
	bo := outcomeIgnore
	if a.err == nil {
		bo = a.outcome()
	}
	r.release(a)
	r.settle(a, AttemptCancelled, bo)
}
