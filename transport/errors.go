package transport

import (
	"errors"

	"github.com/MrVSiK/gotry/resilience"
)

// ErrCircuitOpen is returned, wrapped, when a request is rejected before any
// attempt because its host's breaker is open. Match it with errors.Is.
var ErrCircuitOpen error = resilience.ErrCircuitOpen

// ErrAttemptTimeout marks an attempt cut off by WithPerAttemptTimeout. Such
// an attempt is retried; the caller sees it only when retries stop.
//
// An attempt's timeout is a deadline, the attempt's own, so the give-up
// error after attempts that timed out also matches context.DeadlineExceeded
// (as a net.Error, its Timeout method reports true), while the caller's
// context is still alive. Code that must tell the two apart asks for
// ErrAttemptTimeout first, as ClassifyError does:
//
//	switch {
//	case errors.Is(err, transport.ErrAttemptTimeout):
//		// every attempt (at least the last) ran out of its own time; the
//		// caller's deadline had not passed: a retry later may succeed
//	case errors.Is(err, context.DeadlineExceeded):
//		// the caller's own deadline passed (then ctx.Err() != nil too)
//	}
//
// When the caller's deadline passes, RoundTrip returns the context's error,
// which does not match ErrAttemptTimeout. ClassifyError tells them apart
// the same way (ClassAttemptTimeout, ClassDeadline), and so does the
// error.type that package telemetry records.
var ErrAttemptTimeout error = resilience.ErrAttemptTimeout

// Error is the give-up error after more than one attempt when no response can
// be returned. Attempts counts attempts launched, Err is the last attempt's
// error and Errs every attempt's error, so errors.Is and errors.As find an
// error from any attempt.
type Error = resilience.Error

// ErrAttemptLost is the context.Cause of an attempt cancelled on purpose: it
// lost a hedge race, or the request ended without it. Code running inside an
// attempt (a base RoundTripper) can use it to tell such a cancellation from
// the caller's.
var ErrAttemptLost error = resilience.ErrAttemptLost

// ErrBodyTruncated is the error that the Body of a response returned on
// give-up yields after the bytes that were kept of it, when it was cut (see
// WithMaxRetainedBody): it was longer than the limit, or its reading was
// interrupted. Match it with errors.Is.
var ErrBodyTruncated = errors.New("transport: retained response body truncated")

// ErrNilResponse is returned when the base RoundTripper breaks its contract
// by returning neither a response nor an error.
var ErrNilResponse = errors.New("transport: base RoundTripper returned a nil response and a nil error")

// errNilURL is returned for a request without a URL, as net/http does.
var errNilURL = errors.New("transport: nil Request.URL")
