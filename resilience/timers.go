package resilience

import (
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// The engine's pooled timers, entries of e.queues (clock.Queues: arming
// one is a clock read and a list append, not a trip through the runtime's
// timers): a timer made once serves call after call, its callback finding
// the call (or attempt) of the moment through its target pointer, so arming
// one makes no closure. The pointer is a plain field: it is set before the
// timer is armed (arming orders it before the callback) and cleared only
// after a Stop that succeeded (the callback will not run). A timer whose
// Stop fails may still be running its callback: it is not pooled again, and
// what its pointer reaches is not reused either.

// hedgeTimer is the timer of an inline attempt's hedge delay, kept with its
// run (run.spareHT) rather than in a pool, so it is pooled with the run. Its
// callback reaches the call through target, so one timer serves call after
// call without a new closure.
type hedgeTimer struct {
	t      clock.Entry
	target *hedgeFirer
}

// hedgeFirer is a call whose inline attempt a hedgeTimer watches.
type hedgeFirer interface{ hedgeFired(ht *hedgeTimer) }

func (ht *hedgeTimer) fire() {
	if p := ht.target; p != nil {
		(*p).hedgeFired(ht)
	}
}

// timeoutTimer is a pooled timer for a per-attempt timeout: it cancels the
// attempt target points at.
type timeoutTimer struct {
	t      clock.Entry
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
		tt.t.F = tt.fire
	}
	tt.target = own
	e.queues.Arm(&tt.t, d)
	return tt
}

// stop disarms tt and reports whether it had not fired; only then is it
// pooled again. A timer that fired may still be running its callback, which
// cancels the attempt's context: that attempt must not be reused.
func (e *Engine) stopTimeout(tt *timeoutTimer) bool {
	if !tt.t.Stop() {
		return false
	}
	tt.target = nil
	e.timeouts.Put(tt)
	return true
}
