package telemetry

import (
	"net/http"
	"net/textproto"

	"go.opentelemetry.io/otel/propagation"
)

// headerCarrier writes an attempt's trace context into the attempt's own
// request headers, as propagation.HeaderCarrier does, for less: the keys
// the propagators otel ships write are canonicalised from constants (the
// textproto canonicalisation allocates the key each time), and the first
// values share the attempt's allocation instead of a []string each. Set
// replaces a key's values, as http.Header.Set does. It lives in its
// attempt and is written on the attempt's goroutine before the request is
// sent.
type headerCarrier struct {
	h    http.Header
	vals [2]string // backing for the first len(vals) values Set
	n    int       // of vals used
}

var _ propagation.TextMapCarrier = (*headerCarrier)(nil)

// Get returns the first value of key.
func (hc *headerCarrier) Get(key string) string { return hc.h.Get(key) }

// Keys returns the header's keys.
func (hc *headerCarrier) Keys() []string { return propagation.HeaderCarrier(hc.h).Keys() }

// Set sets key to the single value v. The slice stored has no spare
// capacity, so a later Add to the header copies it rather than writing
// into the carrier.
func (hc *headerCarrier) Set(key, v string) {
	k := canonicalKey(key)
	if hc.n < len(hc.vals) {
		hc.vals[hc.n] = v
		hc.h[k] = hc.vals[hc.n : hc.n+1 : hc.n+1]
		hc.n++
		return
	}
	hc.h[k] = []string{v}
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey(k), without an
// allocation for the W3C trace context and baggage keys.
func canonicalKey(k string) string {
	switch k {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}
