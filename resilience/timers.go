package resilience

import (
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// The engine's pooled timers: AfterFunc timers of the engine's clock, the
// same code on the real clock and on a test's fake one. A timer made once
// serves call after call (Reset, then Stop), its callback finding the call
// (or attempt) of the moment through a pointer field, so arming one
// makes no closure and no allocation. The pointer is a plain field: it is
// set before the timer is armed (arming orders it before the callback) and
// cleared only after a Stop that succeeded (the callback will not run). A
// timer whose Stop fails may still be running its callback: it is not
// pooled again, and what its pointer reaches is not reused either.

// pooledTimer is an AfterFunc timer of the engine's clock, made on its
// owner's first arm and reset on the next ones.
type pooledTimer struct{ t clock.Timer }

// stop disarms the timer and reports whether it had not fired.
func (p *pooledTimer) stop() bool { return p.t.Stop() }

// hedgeTimer is the timer of an inline attempt's hedge delay, kept with its
// run (run.spareHT) rather than in a pool, so it is pooled with the run.
//
// It is also where the caller and the timer's callback meet once it fired
// (see hedgeFired and inlineReturned): a timer that fired is never armed
// again, so its fields speak of one attempt only, and a callback that
// finds its attempt returned (a nil) leaves without touching the call.
// Until the timer is armed they are the caller's; from then on mu guards
// a, admitting and panic.
type hedgeTimer[T any] struct {
	pooledTimer
	r *run[T] // the call whose inline attempt it watches

	mu        sync.Mutex
	cond      sync.Cond     // on mu: signals the end of admitting (set up when first needed)
	a         *attempt[T]   // the inline attempt it watches, until that attempt returns
	admitting bool          // the callback is admitting a hedge (with no lock held: it fires hooks)
	panic     *attemptPanic // a hook panicked during that admission: the caller re-raises it
}

// waitAdmission waits, with ht.mu held, until the callback is not
// admitting a hedge.
func (ht *hedgeTimer[T]) waitAdmission() {
	for ht.admitting {
		ht.cond.Wait()
	}
}

// arm arms ht for d on c. (The method value ht.fire is made only with the
// timer, once: made on every arm, it would be an allocation per call.)
func (ht *hedgeTimer[T]) arm(c clock.Clock, d time.Duration) {
	if ht.t == nil {
		ht.t = c.AfterFunc(d, ht.fire)
		return
	}
	ht.t.Reset(d)
}

func (ht *hedgeTimer[T]) fire() {
	if r := ht.r; r != nil {
		r.hedgeFired(ht)
	}
}

// timeoutTimer is a pooled timer for a per-attempt timeout: it cancels the
// attempt target points at.
type timeoutTimer struct {
	pooledTimer
	target *ownCtx
}

func (tt *timeoutTimer) fire() {
	if p := tt.target; p != nil {
		p.cancel(ErrAttemptTimeout)
	}
}

// armTimeout arms a pooled timer that cancels *own with ErrAttemptTimeout
// after d.
func (e *Engine) armTimeout(d time.Duration, own *ownCtx) *timeoutTimer {
	tt, _ := e.timeouts.Get().(*timeoutTimer)
	if tt == nil {
		tt = new(timeoutTimer)
	}
	tt.target = own
	if tt.t == nil {
		tt.t = e.clock.AfterFunc(d, tt.fire)
	} else {
		tt.t.Reset(d)
	}
	return tt
}

// stopTimeout disarms tt and reports whether it had not fired; only then is
// it pooled again. A timer that fired may still be running its callback,
// which cancels the attempt's context: that attempt must not be reused.
func (e *Engine) stopTimeout(tt *timeoutTimer) bool {
	if !tt.stop() {
		return false
	}
	tt.target = nil
	e.timeouts.Put(tt)
	return true
}
