// Package sdktest runs clients that nobody on the gotry team wrote
// (Prometheus' Go API client, the OpenTelemetry OTLP/HTTP trace exporter)
// through gotry's transport, against loopback servers that fail the way
// real ones do: 503 and 429 with Retry-After, connections reset. Its tests
// pin which of their requests gotry retries (only those that are safe to
// send twice, or that a configuration says are) and the wiring of gotry's
// telemetry under an exporter that cannot trace its own exports.
//
// It holds only tests: it keeps those SDKs out of the core packages' tests.
package sdktest
