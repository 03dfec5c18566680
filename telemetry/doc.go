// Package telemetry makes gotry observable: OpenTelemetry spans and metrics
// and zap or log/slog lines for every request, attempt, retry, hedge,
// backoff, budget refusal and breaker change, all from the hooks of the
// transport and resilience packages. Setup is one option per transport or
// retrier:
//
//	tel := telemetry.New(telemetry.WithLogger(zapLogger)) // otel globals; no logs without a logger
//	tr := transport.New(base, tel.Transport(telemetry.Name("payments")))
//	r := resilience.NewRetrier(tel.Retrier(telemetry.Name("jobs")))
//	e := resilience.NewEngine(resilience.Settings{}, tel.Engine(telemetry.Name("ledger")))
//
// Telemetry.Transport, Telemetry.Retrier and Telemetry.Engine give spans,
// metrics, logs and gauges at once, and compose with the package's other options. With
// otelhttp in the transport's base, otelhttp makes the attempts' CLIENT
// spans and gotry none, adding its attempt attributes to them (see
// Telemetry.Transport; behind a RoundTripper without an Unwrap method gotry
// finds otelhttp from the first response, logs MsgSpansBelow once and
// stops making attempt spans then); AttemptAnnotator inside otelhttp does
// so from each attempt's start:
//
//	tr := transport.New(otelhttp.NewTransport(tel.AttemptAnnotator(base)), tel.Transport())
//
// A program that exports to Prometheus and has no OpenTelemetry of its own
// gives New the meter provider that package promexport
// (github.com/MrVSiK/gotry/telemetry/promexport, a module of its own, so
// that the Prometheus client stays off the build list of programs that do
// not use it) makes, and serves it:
//
//	prom, err := promexport.New(nil)
//	tel := telemetry.New(telemetry.WithMeterProvider(prom))
//	http.Handle("/metrics", prom)
//
// Traces follow the OpenTelemetry HTTP client conventions. Each RoundTrip is
// an INTERNAL span "gotry {method}" (attributes http.request.method,
// server.address, server.port, the final http.response.status_code or
// error.type, gotry.attempts and gotry.reason, and gotry.retries,
// gotry.hedges and gotry.backoff.total when not zero). Each physical attempt
// is its child: a CLIENT span "{method}" whose context is injected into that
// attempt's headers (W3C traceparent with the default propagator), carrying
// url.full (credentials and the conventions' sensitive query values
// REDACTED, no fragment), network.protocol.version,
// gotry.attempt.time_to_headers, gotry.attempt.outcome and
// gotry.attempt.probe, and on a resend http.request.resend_count and
// gotry.attempt.kind (the span without them is the first attempt). The
// returned attempt's span ends when its body is closed or read to EOF (at
// once when it is http.NoBody); every other attempt's ends with the attempt (a
// retried one once its response is read and closed, before the backoff). A
// hedge loser is cancelled, not failed: its span has no error status. Each
// backoff sleep is an INTERNAL span "gotry backoff"; retries, hedges,
// budget refusals, breaker rejections and breaker transitions are span
// events on the request span.
//
// Overload (transport.WithConcurrencyLimit): an attempt the limit refuses is
// a "gotry.limit.shed" event on the request span (gotry.attempt,
// gotry.attempt.kind, gotry.criticality, the host's limit
// gotry.limit.current, gotry.limit.in_flight and the seconds it waited,
// gotry.limit.waited), and a first attempt that waited for its permit is a
// "gotry.limit.wait" event with the same numbers. A request shed before any
// attempt ends with gotry.reason "overloaded" and error.type "overloaded",
// and has no attempt span: nothing was sent. The gauges gotry.limit.current
// and gotry.limit.in_flight show each host's limit against what is in
// flight, the counter gotry.limit.shed counts what was shed by kind and
// criticality, and the give-up metrics and lines carry the reason
// "overloaded"; shed lines (MsgShed) are aggregated per host and kind.
//
// Metrics are the gotry.* instruments listed in METRICS.md, with their
// Prometheus names, and the HTTP client conventions'
// http.client.request.duration per physical attempt (recorded by otelhttp
// instead when otelhttp makes the attempt spans, so no attempt counts
// twice); dashboards built for OpenTelemetry HTTP clients work on them.
// Labels follow the HTTP conventions plus gotry.* ones; gotry.transport
// names the downstream when the wiring was given a Name. They never carry
// a URL, path or attempt number, and server.address is bounded by
// WithHostLimit (past it, hosts fold into OtherHost). Only the latency
// histograms take exemplars (the trace_id and span_id of a sampled request),
// since each costs a clock read and a copy per measurement; serve them as
// OpenMetrics to see them in Prometheus and Grafana.
//
// Gauges (gotry.budget.tokens, gotry.breaker.state,
// gotry.breaker.state.duration, gotry.hedge.delay,
// gotry.hedge.max_extra_load, gotry.limit.current, gotry.limit.in_flight)
// are read at each collection from one Stats
// snapshot of every transport and retrier the Telemetry was wired into,
// added up across them before they are observed: the transports that share
// a label set (two unnamed ones calling one host) report the tokens their
// budgets hold together, the sum of their limits, the worst breaker state
// and the longest hedge delay, so no transport's value is lost. They are
// registered with the meter once, at the first, and hold each source
// weakly: a transport or retrier the program drops leaves the gauges once it
// is garbage collected, with nothing to unregister.
//
// Logs go to zap (WithLogger) or slog (WithSlogLogger) with field keys equal
// to the span attribute keys and trace_id/span_id, so logs, traces and
// metrics join. Fields are built only when the level is enabled. Give-up
// lines are aggregated per host and reason, shed lines per host and attempt
// kind (WithGiveUpLogInterval).
//
// gotry composes with otelhttp either way round; README.md shows both
// recipes and the trace tree each produces. Inside gotry, otelhttp makes the
// one CLIENT span per attempt; outside it, otelhttp's CLIENT span is the
// parent of gotry's request span, and each attempt still has one CLIENT
// span, gotry's. A Telemetry is safe for concurrent use; create one per
// process (or per provider set) and wire every transport and retrier with
// it: one adapter serves both.
package telemetry
