package transport

import (
	"net/http"

	"github.com/MrVSiK/gotry/resilience"
)

// Hooks observe a Transport. They are resilience.Hooks, the one event
// vocabulary of the engine, the transport and resilience.Retry; see there
// for when each fires and on which goroutine. For the transport, a call is
// one RoundTrip: an event's Key is the request's breaker key (its
// normalised host) and its Subject the caller's original request, read with
// RequestOf; OnAttemptStart's Carrier is the attempt's private copy of the
// headers, read with HeaderOf; Code is the response's status; OnResultDone
// fires when the returned response's body is closed or read to EOF
// (installing it wraps every returned body). Hooks must not modify the
// request; OnAttemptEnd's response (ResponseOf) is for its status, headers
// and protocol only: hooks never read, close or modify its body.
type Hooks = resilience.Hooks

// RequestOf returns the caller's original request an event of a Transport
// belongs to (e.Event of any event), or nil for an event of another adapter.
// Hooks must not modify it.
func RequestOf(e resilience.Event) *http.Request {
	req, _ := e.Subject.(*http.Request)
	return req
}

// HeaderOf returns the headers the attempt of e will send: its own copy,
// which an OnAttemptStart hook may modify (to inject trace context, say).
// It is nil for an event of another adapter.
func HeaderOf(e resilience.AttemptStartEvent) http.Header {
	h, _ := e.Carrier.(http.Header)
	return h
}

// ResponseOf returns the response an attempt of a Transport ended with, or
// nil when it ended with an error or e is another adapter's. Its body may
// already be closed (the attempt lost, or was superseded) and hooks must not
// read, close or modify it; its status, headers and Proto may be read while
// the hook runs.
func ResponseOf(e resilience.AttemptEndEvent) *http.Response {
	resp, _ := e.Result.(*http.Response)
	return resp
}
