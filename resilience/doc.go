// Package resilience is the HTTP-agnostic core of gotry: backoff strategies,
// a retry budget, per-key circuit breakers and the attempt engine that
// schedules retries and hedges, sleeps between them and decides when to give
// up.
//
// The engine knows nothing of HTTP. Package transport adapts it to
// http.RoundTripper (cloning requests, replaying bodies, classifying
// responses, honouring Retry-After); Retry adapts it to any
// func(context.Context) (T, error). Both share the same Budget, Breakers and
// Hooks types, so one retry policy and one set of telemetry adapters serve
// HTTP and non-HTTP work alike.
//
// Everything here is safe for concurrent use unless its doc says otherwise,
// and the package imports only the standard library.
package resilience
