// Package transport is gotry's http.RoundTripper: wrap any base transport and
// every call made through it gains retries with backoff, Retry-After
// handling, a retry budget, a per-host circuit breaker and request hedging,
// with hooks that let telemetry see every attempt.
//
//	client := &http.Client{Transport: transport.New(nil)}
//	resp, err := client.Get(url) // unchanged call site
//
// The caller's *http.Request is never modified: each attempt is sent as a
// shallow clone with its own context and, when it is a replay, its own body.
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
