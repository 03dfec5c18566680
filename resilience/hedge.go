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
// fires, then the driver. The handover happens under the fired timer's
// lock (see hedgeTimer), and the caller touches no call state between the
// handover and the driver's result.

// errCallerPanicked stands, for the driver, for a panic of the caller's own
// attempt: the caller re-panics with the real value on its own goroutine.
var errCallerPanicked = errors.New("resilience: the caller's attempt panicked")

// runInline runs attempt a on the caller's goroutine (hedging mode, before
// any hedge fired), with the hedge timer armed if a hedge could follow it.
// If the call was handed over to a driver meanwhile (r.sh is set), a goes
// to the driver, and the caller's loop then waits for the driver's result.
func (r *run[T]) runInline(ctx context.Context, a *attempt[T]) {
	if r.armInline(a) == nil { // the last attempt the call may make: no hedge can follow
		r.exec(ctx, a)
		r.ready = a
		return
	}
	returned := false
	defer func() {
		if !returned {
			r.inlinePanicked(a)
		}
	}()
	r.exec(ctx, a) // calls inlineReturned as soon as Do returns
	returned = true
	if r.sh == nil { // (inlineReturned met the timer's callback, if it ran, under its lock)
		r.ready = a
		return
	}
	r.finish(ctx, a)
}

// inlineReturned runs as the inline attempt a's Do returns: it disarms the
// hedge timer and, if it fired, waits for its callback to have taken the
// call over (r.sh set) or left. From here on no callback touches a.
func (r *run[T]) inlineReturned(a *attempt[T]) {
	ht := a.ht
	a.ht = nil
	if ht.stop() { // answered within the delay: no hedge, nobody else involved
		ht.a, ht.r = nil, nil
		r.spareHT = ht // for the call's next inline attempt, or the run's next call
		return
	}
	// The timer fired: its callback has taken the call over, or finds a
	// returned and leaves. Either way it may still touch r, so r is not
	// pooled.
	ht.mu.Lock()
	ht.a = nil
	ht.waitAdmission()
	p := ht.panic
	ht.panic = nil
	ht.mu.Unlock()
	r.lingering = true
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
// last attempt the call may make. (Arming the timer publishes ht's fields
// to its callback: arming a timer orders the two.)
func (r *run[T]) armInline(a *attempt[T]) *hedgeTimer[T] {
	if r.launched >= r.maxAttempts {
		return nil
	}
	ht := r.spareHT
	if ht == nil {
		ht = new(hedgeTimer[T])
	}
	r.spareHT = nil
	ht.r, ht.a = r, a
	a.ht = ht
	ht.arm(r.e.clock, r.hedgeDelay)
	return ht
}

// lateTimeout reports whether an inline attempt's per-attempt timeout is
// armed late, by its hedge timer's callback (see attempt.ht).
func (r *run[T]) lateTimeout() bool { return r.c.Policy.PerAttemptTimeout > r.hedgeDelay }

// inlinePanicked runs while the caller's inline attempt panics: a driver,
// if the call has one, is told (it ends the call), and the panic goes on.
func (r *run[T]) inlinePanicked(a *attempt[T]) {
	if ht := a.ht; ht != nil { // Do or OnAttemptStart panicked: the timer still watches a
		a.ht = nil
		ht.stop()
		ht.mu.Lock()
		ht.a = nil
		ht.waitAdmission()
		ht.mu.Unlock()
	}
	if a.timer != nil { // armed late by the hedge timer's callback
		a.timer.stop()
	}
	r.lingering = true
	if sh := r.sh; sh != nil {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if !sh.decided {
			a.panicked = &attemptPanic{value: errCallerPanicked}
			sh.done = append(sh.done, a)
			sh.signal()
		}
	}
}

// hedgeFired runs on the hedge timer's goroutine when the delay passed. If
// the caller is still in its attempt and a hedge may launch, this goroutine
// takes the call over and drives it to its end.
func (r *run[T]) hedgeFired(ht *hedgeTimer[T]) {
	ht.mu.Lock()
	a := ht.a
	if a == nil {
		ht.mu.Unlock() // stale: the attempt answered first
		return
	}
	if r.lateTimeout() {
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
	ht.admitting = true
	if ht.cond.L == nil {
		ht.cond.L = &ht.mu
	}
	ht.mu.Unlock()
	var ad admission
	in := r.e.instant() // the hedge's admission
	ok, p := r.admitHedgeRecovering(&ad, &in)
	ht.mu.Lock()
	ht.admitting = false
	ht.cond.Broadcast()
	ht.panic = p
	if !ok || ht.a == nil {
		// Refused (the call goes on unhedged, as after a refusal in the
		// loop), or the caller's attempt answered meanwhile: no handover.
		ht.mu.Unlock()
		r.giveBack(&ad)
		return
	}
	sh := r.goConcurrent()
	sh.finished = make(chan struct{})
	sh.active = append(sh.active, a)
	ht.mu.Unlock()
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

// goConcurrent gives the call its concurrent half: from now on its
// attempts run on goroutines of their own, reporting to a driver through
// done and wake. (Under the fired hedge timer's lock, or before any other
// goroutine knows r.)
func (r *run[T]) goConcurrent() *shared[T] {
	sh := &r.shStore
	sh.wake = make(chan struct{}, 1)
	sh.active = sh.activeBuf[:0]
	sh.done = sh.doneBuf[:0]
	r.sh = sh
	return sh
}

// handedOff reports whether a hedge timer's goroutine took the call over
// (see hedgeFired): the caller, which reads it, then waits for that
// driver's result.
func (r *run[T]) handedOff() bool { return r.sh != nil && r.sh.finished != nil }

// drive runs the call from a hedge timer's goroutine: it launches the hedge
// admitted into ad at in, then loops until the call ends, and hands the
// result (or a panic) to the caller. From here this goroutine drives the
// call, so r.held is its own; a panic gives back what it holds.
func (r *run[T]) drive(ad admission, in *instant) {
	sh := r.sh
	defer func() {
		if p := recover(); p != nil {
			r.giveBack(&r.held)
			sh.finalPanic = &attemptPanic{value: p}
			r.decide()
		}
		close(sh.finished)
	}()
	r.held = ad
	r.launchHedge(in)
	sh.final = r.loop(false)
}

// awaitFinal waits for the driver's result (the caller, after a handover).
// The wait is bounded: the driver ends the call when the caller's context
// ends.
func (r *run[T]) awaitFinal() Result[T] {
	sh := r.sh
	<-sh.finished
	if p := sh.finalPanic; p != nil {
		if err, ok := p.value.(error); !ok || !errors.Is(err, errCallerPanicked) {
			panic(p.value)
		}
	}
	return sh.final
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
	sh := r.sh
	sh.mu.Lock()
	if !sh.decided {
		sh.done = append(sh.done, a)
		sh.mu.Unlock()
		sh.signal()
		return
	}
	sh.mu.Unlock()
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

// take takes the oldest finished attempt off both lists, or returns nil
// when none is waiting.
func (sh *shared[T]) take() *attempt[T] {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.done) == 0 {
		return nil
	}
	a := sh.done[0]
	n := copy(sh.done, sh.done[1:])
	sh.done[n] = nil
	sh.done = sh.done[:n]
	for i, x := range sh.active {
		if x == a {
			n := copy(sh.active[i:], sh.active[i+1:])
			sh.active[i+n] = nil
			sh.active = sh.active[:i+n]
			break
		}
	}
	return a
}

// signal wakes the driver; a signal already pending is enough.
func (sh *shared[T]) signal() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// armHedge (re)arms the driver's hedge timer when another hedge could
// launch (a concurrent call).
func (r *run[T]) armHedge() {
	sh := r.sh
	if sh == nil || r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
		r.stopHedge()
		return
	}
	if sh.timer == nil {
		if t, ok := r.e.timers.Get().(clock.Timer); ok {
			t.Reset(r.hedgeDelay)
			sh.timer = t
			return
		}
		sh.timer = r.e.clock.NewTimer(r.hedgeDelay)
		return
	}
	sh.timer.Stop()
	sh.timer.Reset(r.hedgeDelay)
}

// stopHedge disarms the driver's hedge timer, if the call has one, and
// returns it to the pool. With Go 1.23+ timer semantics (and the fake
// clock's), a stopped timer delivers no stale value, so a pooled timer is
// as good as a new one.
func (r *run[T]) stopHedge() {
	if sh := r.sh; sh != nil && sh.timer != nil {
		sh.timer.Stop()
		r.e.timers.Put(sh.timer)
		sh.timer = nil
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
	sh := r.sh
	if sh == nil {
		return
	}
	sh.mu.Lock()
	if sh.decided {
		sh.mu.Unlock()
		return
	}
	sh.decided = true
	active, late := sh.active, sh.done
	sh.active, sh.done = nil, nil
	sh.mu.Unlock()
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
