package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The hop protocol. A chain of services (client → A → B → leaf), each
// calling the next through a gotry Transport, must not retry at every hop,
// or the retries multiply (three attempts at each of three hops are 27 at
// the leaf), and the hops below must stop working for a caller that has
// given up. Three headers carry what one hop tells the next:
//
//   - RetriesLeftHeader, on a request: how many more attempts the sender
//     will make if this one fails. A service whose caller will retry makes
//     one attempt per call below and passes the promise on; on its caller's
//     last attempt it retries as usual. So one hop retries a failure, and
//     along a chain the attempts add up rather than multiply.
//   - TimeoutHeader, on a request: the sender's time left, in milliseconds,
//     as gRPC's grpc-timeout and Envoy's x-envoy-expected-rq-timeout-ms.
//     The service puts it on the request's context, so its calls below
//     send their own time left in turn, and no hop starts an attempt,
//     retry or hedge after the top caller's deadline.
//   - PushbackHeader, on an answer: the service retried below (or found a
//     breaker open) and still fails. The caller does not retry that answer.
//
// Who believes what. A header from another process is input, and these
// change what a service does, so both ends take them only from peers they
// were told to trust (Envoy's internal and external requests are the
// model: it strips its own x-envoy-* headers from external requests):
//
//   - Middleware believes RetriesLeftHeader and TimeoutHeader only from a
//     caller that WithTrustedCallers accepts; by default none. From any
//     other caller both are ignored and removed from the request the
//     handler sees, so a handler that forwards its request's headers (a
//     reverse proxy) cannot carry them inward either. No address tells a
//     caller inside a system from a proxy relaying the internet to it (a
//     load balancer, an ingress, a sidecar or an nginx on the same host
//     connect from private or loopback addresses), so no address is
//     trusted by default.
//   - A Transport sends RetriesLeftHeader and TimeoutHeader, and honours
//     PushbackHeader, only for hosts that WithHopPeers accepts; by
//     default none. A third-party API gets no header of gotry's and cannot
//     stop a retry with one. WithPushback(false) stops honouring it even
//     from peers.
//
// What a hostile or broken peer can do, even when trusted. A malformed,
// repeated or out-of-range value is ignored, as if absent. RetriesLeftHeader
// can only make a service retry less for that one request. TimeoutHeader
// can only shorten that request's deadline, never extend one the service
// already has: what a caller could do anyway by hanging up. A caller with
// less than MinHopTimeout left is answered 504 at once, with
// PushbackHeader. PushbackHeader stops the retries of that one answer and
// nothing else: the answer still counts as the failure it is, for the
// breaker and the retry budget (a throttle, which the breaker ignores by
// design, stays a throttle), a Classifier's own Retry or Throttled decision
// still retries it, and an attempt still in flight (a hedge, or the
// attempt a hedge raced) is not cancelled for it: the call waits for it.
// So a downstream, or a proxy that copies its headers, cannot keep a
// caller's breaker closed or its budget full while every call fails.
//
// Failure modes. A service whose caller promised a retry, and whose answer
// to a failure below is a status its caller does not retry (a 500 under
// the default classifier, or a 200 with an error in the body), breaks the
// promise: nobody retries. Answer a failure below with the status it came
// with, or a 502, 503 or 504. A relative timeout does not count the time
// the request spends in transit (a new connection's set-up included), so
// each hop's deadline falls a transit time after its caller's; the value
// is rounded down to the millisecond, which takes a warm connection's
// back on a LAN. A proxy
// between two hops that does not speak the protocol passes the request's
// headers on unchanged: the next hop then gets the caller's values, not
// the proxy's.

// Header names and values of the hop protocol. They are gotry's own names
// (no standard covers this); "Gotry-" marks them as such.
const (
	// RetriesLeftHeader, on a request, is the number of further attempts
	// the sender's side will make if this one fails: a decimal from 0 to
	// 1000. It is what the sender will actually do: 0 for a request it may
	// not repeat (a POST without an idempotency key, a body it cannot send
	// again), its own attempts left under a per-request Policy, its
	// caller's promise when it makes one attempt for a caller that will
	// retry. Middleware ignores any other value, a repeated header, and the
	// header from a caller it does not trust.
	RetriesLeftHeader = "Gotry-Retries-Left"
	// TimeoutHeader, on a request, is the sender's time left for it, in
	// whole milliseconds (rounded down), a decimal of one to eight digits
	// as grpc-timeout allows: the sooner of its context's deadline and its
	// per-attempt timeout. Middleware ignores any other value (a sign, a
	// unit, a fraction, nine digits or more), a repeated header, and the
	// header from a caller it does not trust.
	TimeoutHeader = "Gotry-Timeout-Ms"
	// PushbackHeader, on an answer, with the value PushbackRetried, says
	// that the retrying was already done below and the caller should not
	// retry. A Transport ignores any other value, a repeated header, the
	// header from a host that is not a peer (WithHopPeers), and the header
	// on an answer that would not be retried anyway.
	PushbackHeader = "Gotry-Pushback"
	// PushbackRetried is PushbackHeader's value: retried below, don't
	// retry.
	PushbackRetried = "retried-below"
)

// MinHopTimeout is the least time left with which a request is sent to, or
// served by, a hop: TimeoutHeader's resolution. Middleware answers a
// trusted caller that says it has less (a value of 0) at once, 504 with
// PushbackHeader, without calling the handler; a Transport does not send
// an attempt to a peer with less than that left of its context's deadline
// (the attempt fails at once with an error matching
// context.DeadlineExceeded, which neither the breaker nor the budget
// counts). A larger floor would fit one kind of service and not another (a
// cache answers in microseconds, a fan-out needs tens of milliseconds): a
// handler that needs more checks its context's deadline itself.
const MinHopTimeout = time.Millisecond

// maxRetriesLeft is the largest RetriesLeftHeader value Middleware accepts:
// more attempts than that is no real policy, so such a value is garbage.
const maxRetriesLeft = 1000

// maxTimeoutDigits bounds TimeoutHeader's value, as grpc-timeout's: eight
// digits, just over a day in milliseconds. A Transport with more time
// than that left sends no header: the next hop's own deadline is then as
// good.
const maxTimeoutDigits = 8

// hopHeaders are the request headers of the protocol, which Middleware
// removes from an untrusted caller's request.
var hopHeaders = [...]string{RetriesLeftHeader, TimeoutHeader}

// hop is what Middleware records of one incoming request for the calls
// made under it. Safe for concurrent use: a handler may fan out.
type hop struct {
	above int // retries the trusted caller said its side will still make; 0 for none (or no valid header)
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
// RetriesLeftHeader, TimeoutHeader and PushbackHeader; the package doc's
// "Chains of services" gives the whole protocol, its trust model and its
// failure modes).
//
// From a caller that WithTrustedCallers accepts (by default none) it
// reads RetriesLeftHeader and TimeoutHeader. It puts what they say in the
// request's context, where every Transport the handler calls through with
// that context (or one derived from it) finds it: when the caller will
// retry, those calls make one attempt each (hedges included); and the
// caller's time left becomes the context's deadline (it never extends one
// the context has), so the calls below stop, and send their own time left
// on, and nothing starts after the caller has given up. A trusted caller
// that says it has less than MinHopTimeout left is answered 504 at once,
// with PushbackHeader, and the handler is not called. From any other
// caller both headers are ignored and removed from the request the
// handler sees.
//
// Whoever the caller, it adds PushbackHeader to a failed answer (a status
// of 500 and up, or 429) when a call made under the request retried or
// found its breaker open.
//
// Middleware reads two options, and ignores the others: WithTrustedCallers
// and WithClock (the clock the deadline is set on). The wrapped
// ResponseWriter keeps Flush, and Unwrap for http.ResponseController. It
// costs an allocation or three a request (the context, the hop, the
// writer), a few more with a deadline.
func Middleware(h http.Handler, opts ...Option) http.Handler {
	cfg := defaultConfig()
	cfg.apply(opts)
	trusted, clk := cfg.trustedCallers, cfg.settings.Clock
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hp := &hop{}
		ctx := r.Context()
		if trusted != nil && trusted(r) {
			hp.above = parseRetriesLeft(r.Header)
			if d, ok := parseTimeout(r.Header); ok {
				if d < MinHopTimeout {
					w.Header().Set(PushbackHeader, PushbackRetried)
					http.Error(w, "gotry: too little time left", http.StatusGatewayTimeout)
					return
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(d)) // never later than ctx's own
				defer cancel()
			}
		} else if hasHopHeader(r.Header) {
			r = withoutHopHeaders(r)
		}
		ctx = context.WithValue(ctx, hopKey{}, hp)
		h.ServeHTTP(&hopWriter{ResponseWriter: w, hop: hp}, r.WithContext(ctx))
	})
}

// WithTrustedCallers sets the callers whose RetriesLeftHeader and
// TimeoutHeader Middleware believes: those for which trusted returns true.
// Default (and nil): none. It is a Middleware option; New ignores it.
// trusted is called once per request, before the handler, and may be
// called concurrently.
//
// Trust only callers that speak the protocol honestly: other services of
// yours, or a proxy of yours that removes the Gotry-* headers of requests
// from outside (as Envoy strips its x-envoy-* headers from external
// requests). A predicate on the caller's address (CallersFrom) is enough
// when nothing untrusted can reach the service from those addresses; a
// service behind a load balancer, an ingress or a sidecar sees their
// addresses for every caller, the internet's included, and should trust
// on something the proxy sets or a client certificate (r.TLS) instead.
func WithTrustedCallers(trusted func(r *http.Request) bool) Option {
	return optionFunc(func(c *config) { c.trustedCallers = trusted })
}

// CallersFrom returns a predicate for WithTrustedCallers that accepts a
// request whose peer address (r.RemoteAddr, as net/http's server sets it)
// is in one of prefixes; an IPv4-mapped IPv6 address counts as its IPv4
// address, and an address that does not parse is not accepted. It is the
// address of the connection: a proxy in front of the service connects
// from its own (see WithTrustedCallers).
func CallersFrom(prefixes ...netip.Prefix) func(r *http.Request) bool {
	ps := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		if p.IsValid() {
			ps = append(ps, p.Masked())
		}
	}
	return func(r *http.Request) bool {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return false
		}
		a := ap.Addr().Unmap().WithZone("")
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
}

// WithHopPeers sets the hosts a Transport speaks the hop protocol with:
// those for which peer returns true. Requests to them carry
// RetriesLeftHeader and, when the request's context has a deadline (or the
// transport a per-attempt timeout), TimeoutHeader, whether or not the
// Transport is used under Middleware; and their answers' PushbackHeader is
// honoured (unless WithPushback(false)). Default (and nil): no host, so a
// Transport sends nothing of the protocol and honours no pushback. peer
// is given the request URL's host name, lower-cased, without port or
// brackets ("orders.internal", "10.0.0.7", "::1"), once per request, and
// may be called concurrently. It is a Transport option; Middleware ignores
// it.
//
// Under Middleware a Transport also removes RetriesLeftHeader and
// TimeoutHeader from requests to other hosts, should the handler have
// copied them from its own request.
func WithHopPeers(peer func(host string) bool) Option {
	return optionFunc(func(c *config) { c.hopPeer = peer })
}

// WithPushback sets whether a Transport honours PushbackHeader on answers
// from its peers (WithHopPeers) by not retrying them (default true). Off,
// a pushback changes nothing: the answer is retried as any other.
func WithPushback(honour bool) Option {
	return optionFunc(func(c *config) { c.ignorePushback = !honour })
}

// parseRetriesLeft returns RetriesLeftHeader's value in h, or 0 when it is
// absent, repeated or not a decimal in 0..maxRetriesLeft.
func parseRetriesLeft(h http.Header) int {
	n, ok := parseDecimal(h, RetriesLeftHeader, 4)
	if !ok || n > maxRetriesLeft {
		return 0
	}
	return int(n)
}

// parseTimeout returns TimeoutHeader's value in h as a duration, and
// whether it holds one: once, a decimal of 1 to maxTimeoutDigits digits.
func parseTimeout(h http.Header) (time.Duration, bool) {
	n, ok := parseDecimal(h, TimeoutHeader, maxTimeoutDigits)
	return time.Duration(n) * time.Millisecond, ok
}

// parseDecimal reads key's one value in h as a decimal of 1 to digits
// digits, surrounding spaces aside: no sign, no spaces inside, no hex.
func parseDecimal(h http.Header, key string, digits int) (int64, bool) {
	v := h[key]
	if len(v) != 1 {
		return 0, false
	}
	s := strings.TrimSpace(v[0])
	if len(s) == 0 || len(s) > digits {
		return 0, false
	}
	var n int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// formatTimeout is TimeoutHeader's value for d, and whether d has one: d
// rounded down to the millisecond, if it fits maxTimeoutDigits.
func formatTimeout(d time.Duration) (string, bool) {
	ms := int64(d / time.Millisecond)
	if ms < 0 || ms > 99_999_999 {
		return "", false
	}
	return strconv.FormatInt(ms, 10), true
}

// pushedBack reports whether an answer carries PushbackHeader with the
// value PushbackRetried (case and surrounding spaces aside), once.
func pushedBack(h http.Header) bool {
	v := h[PushbackHeader]
	return len(v) == 1 && strings.EqualFold(strings.TrimSpace(v[0]), PushbackRetried)
}

// hasHopHeader reports whether h has any of the protocol's request
// headers, under its canonical key.
func hasHopHeader(h http.Header) bool {
	for _, k := range hopHeaders {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}

// dropHopHeaders removes the protocol's request headers from h, under
// every spelling.
func dropHopHeaders(h http.Header) {
	for k := range h {
		for _, hk := range hopHeaders {
			if strings.EqualFold(k, hk) {
				delete(h, k)
			}
		}
	}
}

// withoutHopHeaders returns a shallow copy of r whose headers are a copy
// without the protocol's: a handler must not modify its request, and
// neither does Middleware.
func withoutHopHeaders(r *http.Request) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	r2.Header = r.Header.Clone()
	dropHopHeaders(r2.Header)
	return r2
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

// errHopTooLate is the error of an attempt to a peer that was not sent
// because less than MinHopTimeout was left of the request's deadline. It
// matches context.DeadlineExceeded, so it is not retried and neither the
// breaker nor the budget counts it.
var errHopTooLate = fmt.Errorf("transport: less than %v left for the next hop: %w", MinHopTimeout, context.DeadlineExceeded)
