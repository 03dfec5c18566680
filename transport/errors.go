package transport

import "github.com/MrVSiK/gotry/resilience"

// ErrCircuitOpen is returned, wrapped, when a request is rejected before any
// attempt because its host's breaker is open. Match it with errors.Is.
var ErrCircuitOpen error = resilience.ErrCircuitOpen

// ErrAttemptTimeout marks an attempt cut off by WithPerAttemptTimeout. Such
// an attempt is retried; the caller sees it only when retries stop.
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
