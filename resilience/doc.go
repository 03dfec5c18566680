// Package resilience is the HTTP-agnostic core of gotry: backoff strategies,
// a retry budget, per-key circuit breakers and the attempt engine that
// schedules retries and hedges, sleeps between them and decides when to give
// up.
//
// The engine knows nothing of HTTP. Package transport adapts it to
// http.RoundTripper (cloning requests, replaying bodies, classifying
// responses, honouring Retry-After); Retry adapts it to any
// func(context.Context) (T, error). Both run on an Engine (its retry budget
// and per-key breakers configured by EngineConfig) and report through one
// set of Hooks and events, so one retry policy and one telemetry adapter
// serve HTTP and non-HTTP work alike. Another protocol's adapter is an
// Operation passed to Execute; see its example. ARCHITECTURE.md at
// the repository's root draws one request's path.
//
// The rest of the kit lives in packages of its own below this one, which may
// build on it but are never imported by it: resilience/schedule (a
// configurable backoff calculator, usable as a Backoff), resilience/periodic
// (jittered periodic work), resilience/cache (a single-flight TTL cache) and
// resilience/dnscache (a DNS cache with a DialContext for http.Transport).
// Every jittered delay, here and in the kit, is drawn by one implementation
// with closed bounds: ExponentialJitter draws from [0, d], EqualJitter from
// [d/2, d].
//
// Everything here is safe for concurrent use unless its doc says otherwise,
// and the package imports only the standard library and gotry's internal
// packages.
package resilience
