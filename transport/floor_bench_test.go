package transport_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// armedFloor is the least a transport can do per request, on the success
// path, to keep the armed configuration's semantics (breaker + hedging +
// per-attempt timeout), with no engine around it: it is not a transport
// anyone should use (no retry, no hedge is ever launched, no timeout
// fires), only a benchmark case that prices the parts every design needs,
// each the cheapest way gotry knows:
//
//   - an attempt context of its own, cancelable apart from the caller's, so
//     a loser or a timed-out attempt can be cancelled: one
//     context.WithCancelCause, and the request cloned to carry it;
//   - the winner's context kept alive until its body is closed, then
//     cancelled: a body wrapper;
//   - one timer armed and stopped: a pooled runtime timer, reset and
//     stopped, as the engine's are (the timeout is armed only if the hedge
//     delay passes, as gotry does);
//   - a breaker admission: the host's breaker found by comparing the host
//     with the one found last (a map lookup otherwise; gotry does one
//     sync.Map load per call), and an atomic load of a closed breaker's
//     state (gotry's closed fast path also records the time of use);
//   - a retry budget deposit: one atomic add (gotry's picks a stripe per
//     processor and stamps the second).
//
// Its ratio to bare, next to "armed" in the same run, shows how much of the
// armed cost is these parts and how much is gotry's own bookkeeping.
type armedFloor struct {
	base   http.RoundTripper
	timers sync.Pool // stopped *time.Timer
	hosts  sync.Map  // host -> *floorBreaker
	last   atomic.Pointer[floorBreaker]
	budget atomic.Int64
}

// floorBreaker is a host's breaker as the floor keeps it: its word.
type floorBreaker struct {
	host string
	word atomic.Uint64 // a closed breaker's word: 0
}

func newArmedFloor(base http.RoundTripper) *armedFloor {
	return &armedFloor{base: base}
}

func (f *armedFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	br := f.last.Load()
	if br == nil || br.host != req.URL.Host {
		v, ok := f.hosts.Load(req.URL.Host)
		if !ok {
			v, _ = f.hosts.LoadOrStore(req.URL.Host, &floorBreaker{host: req.URL.Host})
		}
		br = v.(*floorBreaker)
		f.last.Store(br)
	}
	if br.word.Load() != 0 {
		return nil, errFloorOpen
	}
	f.budget.Add(1)
	ctx, cancel := context.WithCancelCause(req.Context())
	t, _ := f.timers.Get().(*time.Timer)
	if t == nil {
		t = time.AfterFunc(time.Second, func() {})
	} else {
		t.Reset(time.Second)
	}
	resp, err := f.base.RoundTrip(req.WithContext(ctx))
	if t.Stop() {
		f.timers.Put(t)
	}
	if err != nil {
		cancel(err)
		return nil, err
	}
	resp.Body = &floorBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

var errFloorOpen = io.ErrClosedPipe // never returned: the breaker stays closed

// floorBody cancels the attempt's context when the body is closed.
type floorBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *floorBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(context.Canceled)
	return err
}
