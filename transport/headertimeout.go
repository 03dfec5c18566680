package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/internal/timeouterr"
)

// The per-attempt header timeout (WithPerAttemptHeaderTimeout): a limit on
// the wait for an attempt's response headers, measured from the moment the
// server may be expected to have the whole request: when the base reports
// (httptrace's WroteRequest) that the request, body included, has been
// written, plus the time the bytes still queued between the client's socket
// and the server may take to drain, as the body's reads measured it
// (drain.go). The engine's per-attempt timeout runs from the start of the
// attempt, so it cannot tell a slow upload from a server that does not
// answer; this one can, because only the transport sees the write end and
// the body's reads.
//
// It is armed per attempt and costs nothing when unset. When set, each
// attempt gets a cancelable child of its context carrying a ClientTrace
// (httptrace.WithClientTrace composes it with a trace the caller's context
// already holds, whose hooks still fire), and a timer of the transport's
// clock, armed by WroteRequest; an attempt with a body sends it wrapped in a
// meteredBody, which lives in the headerTimer (no allocation of its own).
// The child is cancelled when the attempt fails, or, when it succeeds, when
// its response body is closed or read to its end: the body is read under
// that context.

// headerTimer watches one attempt's wait for its response headers.
type headerTimer struct {
	d      time.Duration
	clock  clock.Clock
	cancel context.CancelCauseFunc

	body meteredBody // the attempt's request body when it has one (see metered); set before it is sent

	mu    sync.Mutex
	timer clock.Timer   // armed by the first WroteRequest, reset by a later one
	meter uploadMeter   // the request body's reads, until the first WroteRequest
	drain time.Duration // the extension the first WroteRequest added to d
	ended bool          // the base has returned: a late WroteRequest arms nothing
	fired bool          // the timer cut the attempt off
}

// withHeaderTimeout returns the context an attempt sends with when its
// header timeout is d, and the timer that watches it.
func withHeaderTimeout(ctx context.Context, d time.Duration, cl clock.Clock) (context.Context, *headerTimer) {
	ctx, cancel := context.WithCancelCause(ctx)
	h := &headerTimer{d: d, clock: cl, cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: h.wrote})
	return ctx, h
}

// metered returns body wrapped so that its reads are recorded, for the
// attempt to send instead of body. The wrapper is part of h.
func (h *headerTimer) metered(body io.ReadCloser) io.ReadCloser {
	h.body = meteredBody{rc: body, h: h}
	return &h.body
}

// wrote is the trace's WroteRequest: the request has been written, and the
// wait for the headers starts once the bytes still queued may have drained
// to the server (see drain.go). http.Transport writes a request again when
// it retries it on a new connection by itself (an idempotent request whose
// reused connection broke before any response): the wait then starts over,
// from the last write, with no extension, since the body it rewrote (from
// GetBody) was not metered. A write that failed arms the timer too: the base
// may still wait for an answer.
func (h *headerTimer) wrote(httptrace.WroteRequestInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.ended:
		// The headers came before the body was written (an HTTP/2 server
		// may answer early): nothing to time.
	case h.timer == nil:
		if h.meter.started {
			h.drain = h.meter.drain(h.clock.Now())
		}
		h.timer = h.clock.AfterFunc(h.d+h.drain, h.fire)
	default:
		h.drain = 0
		h.timer.Reset(h.d)
	}
}

// fire cuts the attempt off, unless the base has returned already.
func (h *headerTimer) fire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ended {
		h.fired = true
		h.cancel(ErrAttemptTimeout)
	}
}

// finish settles the attempt once the base has returned resp and err (one of
// them nil): a timer that fired first makes it a header timeout, whatever
// the base returned; otherwise the timer is stopped and the context is
// cancelled with the attempt's end, or with its response body's.
func (h *headerTimer) finish(resp *http.Response, err error) (*http.Response, error) {
	h.mu.Lock()
	h.ended = true
	fired, drain := h.fired, h.drain
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	switch {
	case fired:
		if resp != nil {
			closeResponse(resp) // its context is cancelled: its body is cut off
		}
		if err == nil {
			err = context.DeadlineExceeded
		}
		return nil, &timeouterr.Error{Limit: h.d, Headers: true, Drain: drain, Err: err}
	case err != nil:
		h.cancel(nil)
		return nil, err
	case resp.Body == nil || resp.Body == http.NoBody:
		h.cancel(nil)
		return resp, nil
	}
	wrapEnd(resp).cancel = h.cancel // track adds the response's end to it, when it is returned
	return resp, nil
}

// isHeaderTimeout reports whether err is (or wraps) an attempt's header
// timeout. That error (see finish) is a per-attempt timeout in every
// respect but its clock's start: it matches ErrAttemptTimeout and
// context.DeadlineExceeded, and its Timeout method reports true, as the
// engine's per-attempt timeout error does (it is the same type), so
// ClassifyError (ClassAttemptTimeout), the retry rules, the budget (which
// charges a timeout a whole token), hooks and telemetry treat the two
// alike; Classify also reports it to the concurrency limit as congestion.
func isHeaderTimeout(err error) bool { return timeouterr.IsHeaders(err) }
