package demo

import "go.opentelemetry.io/otel/attribute"

// The attributes the waterfall and the log view read that package
// telemetry does not export (they describe an attempt or a sleep; nobody
// filters by them). TestDemoKeysAreTelemetrys checks each against the spans
// and lines telemetry makes.
const (
	keyAttempt         = attribute.Key("gotry.attempt")
	keyAttemptDuration = attribute.Key("gotry.attempt.duration")
	keyRequestDuration = attribute.Key("gotry.request.duration")
	keyBackoffTotal    = attribute.Key("gotry.backoff.total")
	keyBackoffDelay    = attribute.Key("gotry.backoff.delay")
	keyHedgeInFlight   = attribute.Key("gotry.hedge.in_flight")
)
