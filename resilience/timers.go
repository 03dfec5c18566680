package resilience

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
)

// The engine's pooled AfterFunc timers: a timer made once serves call after
// call, its callback finding the call (or attempt) of the moment through an
// atomic pointer, so arming one costs a Reset and no closure. A timer whose
// Stop fails may still be running its callback: it is not pooled again, and
// what its pointer reaches is not reused either.

// hedgeTimer is a pooled AfterFunc timer for an inline attempt's hedge
// delay. Its callback reaches the call through target, so one timer serves
// call after call without a new closure.
type hedgeTimer struct {
	t      clock.Timer
	target atomic.Pointer[hedgeFirer]
}

// hedgeFirer is a call whose inline attempt a hedgeTimer watches.
type hedgeFirer interface{ hedgeFired(ht *hedgeTimer) }

func (ht *hedgeTimer) fire() {
	if p := ht.target.Load(); p != nil {
		(*p).hedgeFired(ht)
	}
}

// timeoutTimer is a pooled AfterFunc timer for a per-attempt timeout: it
// cancels the attempt target points at.
type timeoutTimer struct {
	t      clock.Timer
	target atomic.Pointer[context.CancelCauseFunc]
}

func (tt *timeoutTimer) fire() {
	if p := tt.target.Load(); p != nil {
		(*p)(ErrAttemptTimeout)
	}
}

// armTimeout arms a pooled timer that cancels *cancel with
// ErrAttemptTimeout after d.
func (e *Engine) armTimeout(d time.Duration, cancel *context.CancelCauseFunc) *timeoutTimer {
	tt, _ := e.timeouts.Get().(*timeoutTimer)
	if tt == nil {
		tt = new(timeoutTimer)
		tt.target.Store(cancel)
		tt.t = e.clock.AfterFunc(d, tt.fire)
		return tt
	}
	tt.target.Store(cancel)
	tt.t.Reset(d)
	return tt
}

// stop disarms tt and reports whether it had not fired; only then is it
// pooled again. A timer that fired may still be running its callback, which
// calls the attempt's cancel func: that attempt must not be reused.
func (e *Engine) stopTimeout(tt *timeoutTimer) bool {
	if !tt.t.Stop() {
		return false
	}
	tt.target.Store(nil)
	e.timeouts.Put(tt)
	return true
}
