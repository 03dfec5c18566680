package resilience

import (
	"context"

	"github.com/MrVSiK/gotry/internal/clock"
)

// Hedging: with MaxHedges and HedgeDelay set, attempts run on goroutines of
// their own; the hedge timer launches another when none has answered in
// time, and the call, once decided, cancels and releases the rest.

// background runs an attempt on its own goroutine (hedging mode) and hands
// the result to the driving goroutine, or releases it if the call is over.
func (r *run[T]) background(ctx context.Context, a *attempt[T]) {
	func() {
		// A panic in Do, Classify or a hook on this goroutine is handed to
		// the goroutine that called Execute, which re-panics with it, so it
		// propagates to the caller as it would without hedging.
		defer func() {
			if p := recover(); p != nil {
				a.panicked = &attemptPanic{value: p}
			}
		}()
		r.exec(ctx, a)
		if a.verd.Retryable && a.err == nil && ctx.Err() == nil {
			// Another attempt is in flight or may follow: free the
			// connection now, here, so the driving goroutine never waits
			// on this body. Bounded by ctx, which is cancelled if the call
			// is decided meanwhile.
			a.v, a.kept = r.c.Op.Retain(ctx, a.v), true
		}
	}()
	r.mu.Lock()
	if !r.decided {
		r.done = append(r.done, a)
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default: // a signal is already pending
		}
		return
	}
	r.mu.Unlock()
	r.releaseLate(a)
}

// armHedge (re)arms the hedge timer when another hedge could launch.
func (r *run[T]) armHedge() {
	if !r.hedging || r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
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

// stopHedge disarms the hedge timer and returns it to the pool. With Go
// 1.23+ timer semantics (and the fake clock's), a stopped timer delivers no
// stale value, so a pooled timer is as good as a new one.
func (r *run[T]) stopHedge() {
	if r.timer != nil {
		r.timer.Stop()
		r.e.timers.Put(r.timer)
		r.timer = nil
	}
}

// hedge launches a hedge if the limits allow it.
func (r *run[T]) hedge() {
	if r.launched >= r.maxAttempts || r.inflight >= 1+r.c.Policy.MaxHedges {
		return
	}
	if r.hk != nil && !r.hk.take() {
		// The key's hard cap on extra load: no hedge now. The timer is
		// not re-armed; the next launch re-arms it.
		r.hk.capped.Add(1)
		return
	}
	t, _, _, ok := r.admitNext(KindHedge)
	if !ok {
		if r.hk != nil {
			r.hk.untake()
		}
		return // no re-arm: the next launch re-arms the timer
	}
	if h := r.e.hooks.OnHedge; h != nil {
		h(HedgeEvent{Event: r.event(), Attempt: r.launched + 1, InFlight: r.inflight + 1,
			Delay: r.hedgeDelay, Adaptive: r.hk != nil})
	}
	r.launch(KindHedge, t)
}

// decide marks the call decided, cancels the attempts in flight and releases
// results that arrived but were not read. Attempts finishing later release
// themselves.
func (r *run[T]) decide() {
	r.stopHedge()
	if !r.hedging {
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
		if a.cancel != nil {
			a.cancel(ErrAttemptLost)
		}
	}
	for _, a := range late {
		r.releaseLate(a)
	}
}

// releaseLate releases an attempt that finished after the call was decided
// and settles it as cancelled.
func (r *run[T]) releaseLate(a *attempt[T]) {
	bo := outcomeIgnore
	if a.err == nil {
		bo = a.outcome()
	}
	r.release(a)
	r.settle(a, AttemptCancelled, bo)
}
