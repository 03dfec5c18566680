// Package transport is gotry's http.RoundTripper: wrap any base transport and
// every call made through it gains retries with backoff, Retry-After
// handling, a retry budget, a per-host circuit breaker and request hedging,
// with hooks that let telemetry see every attempt.
//
//	client := &http.Client{Transport: transport.New(nil)}
//	resp, err := client.Get(url) // unchanged call site
//
// The caller's *http.Request is never modified: an attempt that needs its
// own context (hedging, a per-attempt timeout, hooks), its own body (a
// replay) or its own headers is sent as a shallow clone; a first attempt
// that needs none of these is the caller's request itself, exactly what the
// base would get without gotry.
// Only idempotent requests (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or any
// request carrying an Idempotency-Key or X-Idempotency-Key header) are
// retried or hedged unless non-idempotent retries are enabled, and only when
// the body can be sent again.
//
// The scheduling (attempts, hedges, sleeps, budget, breakers, give-up) is
// resilience.Engine; this package adapts it to HTTP. A Transport is safe for
// concurrent use; create one per downstream and reuse it, or its budget and
// breakers have no memory.
package transport
