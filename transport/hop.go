package transport

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// Hops: a chain of services (client → A → B → leaf), each calling the next
// through a gotry Transport, must not retry at every hop, or the retries
// multiply: three attempts at each of three hops are 27 at the leaf. The
// rule here is that one hop retries a failure, the highest one that can:
//
//   - A Transport whose request context came through [Middleware] (the
//     outbound calls of a service) sends RetriesLeftHeader on every
//     attempt: how many more attempts someone above this one will make if
//     it fails.
//   - [Middleware] reads it from the incoming request. When the caller
//     says it will retry, the Transport underneath (the service's outbound
//     calls made with the request's context) makes one attempt per call,
//     and passes the caller's promise on, so the hops below do not retry
//     either. On the caller's last attempt the service retries as usual.
//   - When a call underneath did retry (or found its breaker open) and the
//     service still answers with a failure, Middleware adds PushbackHeader
//     to the answer, and the caller's Transport does not retry that answer,
//     whether or not it sent RetriesLeftHeader: the retrying was done below.
//
// So along a chain the attempts add up rather than multiply.

// Header names of the hop protocol. They are gotry's own names (no standard
// covers this); "Gotry-" marks them as such.
const (
	// RetriesLeftHeader, on a request, is the number of further attempts
	// the sender's side will make if this one fails: a decimal from 0 to
	// maxRetriesLeft. Middleware ignores any other value, as if the header
	// were absent.
	RetriesLeftHeader = "Gotry-Retries-Left"
	// PushbackHeader, on an answer, with the value PushbackRetried, says
	// that the retrying was already done below and the caller should not
	// retry. A Transport ignores it on an answer that would not be retried
	// anyway, and ignores any other value.
	PushbackHeader = "Gotry-Pushback"
	// PushbackRetried is PushbackHeader's value: retried below, don't
	// retry.
	PushbackRetried = "retried-below"
)

// maxRetriesLeft is the largest RetriesLeftHeader value Middleware accepts:
// more attempts than that is no real policy, so such a value is garbage.
const maxRetriesLeft = 1000

// hop is what Middleware records of one incoming request for the calls
// made under it. Safe for concurrent use: a handler may fan out.
type hop struct {
	above int // retries the caller said its side will still make; 0 for none (or no valid header)
	// pushback: a call under the request retried, or found its breaker
	// open, so a failed answer carries PushbackHeader.
	pushback atomic.Bool
}

type hopKey struct{}

// hopFrom returns the hop of ctx, or nil outside Middleware.
func hopFrom(ctx context.Context) *hop {
	h, _ := ctx.Value(hopKey{}).(*hop)
	return h
}

// Middleware wraps a service's handler for the hop protocol (see
// RetriesLeftHeader and PushbackHeader). It reads RetriesLeftHeader from
// the incoming request and puts what it says in the request's context,
// where every Transport the handler calls through with that context (or
// one derived from it) finds it: when the caller will retry, those calls
// make one attempt each (hedges included) and tell the next hop that a
// retry will come from above. It adds PushbackHeader to a failed answer
// (a status of 500 and up, or 429) when such a call retried or found its
// breaker open while the request was served.
//
// A header the service should not trust can only make the service retry
// less for that one request, never more; a malformed one is ignored (the
// service retries as it would without Middleware). The wrapped
// ResponseWriter keeps Flush, and Unwrap for http.ResponseController. It
// costs an allocation or three a request (the context, the hop, the
// writer).
func Middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hp := &hop{above: parseRetriesLeft(r.Header)}
		ctx := context.WithValue(r.Context(), hopKey{}, hp)
		h.ServeHTTP(&hopWriter{ResponseWriter: w, hop: hp}, r.WithContext(ctx))
	})
}

// parseRetriesLeft returns RetriesLeftHeader's value in h, or 0 when it is
// absent, repeated or not a decimal in 0..maxRetriesLeft.
func parseRetriesLeft(h http.Header) int {
	v := h[RetriesLeftHeader]
	if len(v) != 1 {
		return 0
	}
	s := strings.TrimSpace(v[0])
	if len(s) == 0 || len(s) > 4 {
		return 0
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0 // no sign, no spaces inside, no hex
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxRetriesLeft {
		return 0
	}
	return n
}

// pushedBack reports whether an answer carries PushbackHeader with the
// value PushbackRetried (case and surrounding spaces aside), once.
func pushedBack(h http.Header) bool {
	v := h[PushbackHeader]
	return len(v) == 1 && strings.EqualFold(strings.TrimSpace(v[0]), PushbackRetried)
}

// hopWriter adds PushbackHeader to a failed answer of a request whose
// calls below retried.
type hopWriter struct {
	http.ResponseWriter
	hop   *hop
	wrote bool // the final status was written
}

func (w *hopWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		if (code >= 500 || code == http.StatusTooManyRequests) && w.hop.pushback.Load() {
			w.Header().Set(PushbackHeader, PushbackRetried)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *hopWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer, if it can.
func (w *hopWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // a writer that cannot flush: nothing to do, as net/http's own
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *hopWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// retriesLeft is RetriesLeftHeader's value for attempt number n of a call
// allowed limit attempts under hp: the caller's promise when it made one,
// else this call's own remaining attempts.
func retriesLeft(hp *hop, n, limit int) string {
	if hp.above > 0 {
		return strconv.Itoa(hp.above)
	}
	return strconv.Itoa(max(limit-n, 0))
}
