package dashboards

import "strings"

// This file is the metric contract: every metric and label name that the
// telemetry package exports, spelled as the OpenTelemetry Prometheus exporter
// writes them (unit suffix and, for counters, _total already added). The
// dashboard generator, the alert rules' test and the dashboard tests all read
// it, so a later check can compare it to what telemetry really exports.
//
// Names under gotry_ are gotry's own: OpenTelemetry has no semantic
// convention for retries, hedges, budgets, breakers or concurrency limits.
// http_client_request_duration_seconds is the HTTP client conventions'
// metric, which gotry records per attempt when it makes the attempt spans. The http_* and
// server_* attributes and error_type follow the HTTP client semantic
// conventions.

// ScopeName is the instrumentation scope of every gotry metric; the exporter
// writes it to the otel_scope_name label of every series.
const ScopeName = "github.com/MrVSiK/gotry/telemetry"

// Metric family names, as Prometheus sees them. A histogram family is stored
// as three series names: Name+"_bucket", Name+"_sum" and Name+"_count".
const (
	// MetricRequestDuration is a histogram of whole requests, all attempts
	// and backoff sleeps included.
	MetricRequestDuration = "gotry_request_duration_seconds"
	// MetricAttemptDuration is a histogram of single physical attempts, until
	// response headers or an error.
	MetricAttemptDuration = "gotry_attempt_duration_seconds"
	// MetricAttempts counts attempts by kind and outcome.
	MetricAttempts = "gotry_attempts_total"
	// MetricRetries counts scheduled retries by trigger and delay source.
	MetricRetries = "gotry_retries_total"
	// MetricHedges counts hedged attempts launched.
	MetricHedges = "gotry_hedges_total"
	// MetricRetriesSuppressed counts retries that were wanted but not made.
	MetricRetriesSuppressed = "gotry_retries_suppressed_total"
	// MetricBackoffDelay is a histogram of the delays scheduled before retries
	// (0 for an immediate retry).
	MetricBackoffDelay = "gotry_backoff_delay_seconds"
	// MetricBudgetTokens is an asynchronous gauge of the retry budget's
	// available tokens, one series per transport name (the transports of one
	// name, or the unnamed ones, summed).
	MetricBudgetTokens = "gotry_budget_tokens"
	// MetricBudgetRefusals counts retries and hedges the budget refused.
	MetricBudgetRefusals = "gotry_budget_refusals_total"
	// MetricBreakerState is an asynchronous gauge per host and state: 1 for
	// the breaker's current state, 0 for the others.
	MetricBreakerState = "gotry_breaker_state"
	// MetricBreakerTransitions counts breaker state changes.
	MetricBreakerTransitions = "gotry_breaker_transitions_total"
	// MetricBreakerRejections counts requests an open breaker failed fast.
	MetricBreakerRejections = "gotry_breaker_rejections_total"
	// MetricHedgeDelay is an asynchronous gauge of each host's current
	// adaptive hedge delay, per transport with adaptive hedging.
	MetricHedgeDelay = "gotry_hedge_delay_seconds"
	// MetricHedgeMaxExtraLoad is an asynchronous gauge of adaptive hedging's
	// cap on the fraction of requests that may get a hedge, per transport.
	MetricHedgeMaxExtraLoad = "gotry_hedge_max_extra_load_ratio"
	// MetricHTTPClientDuration is the conventions' http.client.request.duration,
	// per physical attempt (absent when otelhttp makes the attempt spans; then
	// otelhttp's own series, with another otel_scope_name, stand in).
	MetricHTTPClientDuration = "http_client_request_duration_seconds"
	// MetricAttemptsInFlight is a gauge (an up-down counter) of the attempts
	// in flight now, per host.
	MetricAttemptsInFlight = "gotry_attempts_in_flight"
	// MetricRequestRetries is a histogram of retries per request.
	MetricRequestRetries = "gotry_request_retries"
	// MetricRequestTimeLeft is a histogram of what was left of each
	// request's context deadline when it started (requests without one
	// record nothing); under transport.Middleware, a trusted caller's
	// propagated deadline counts.
	MetricRequestTimeLeft = "gotry_request_time_left_seconds"
	// MetricBreakerStateDuration is an asynchronous gauge per host of how
	// long its breaker has been in its current state (the state a label).
	MetricBreakerStateDuration = "gotry_breaker_state_duration_seconds"
	// MetricLimitCurrent is a gauge (an up-down counter) of each host's
	// adaptive concurrency limit, per transport with
	// transport.WithConcurrencyLimit.
	MetricLimitCurrent = "gotry_limit_current"
	// MetricLimitInFlight is a gauge (an up-down counter) of the attempts in
	// flight to each host under its concurrency limit.
	MetricLimitInFlight = "gotry_limit_in_flight"
	// MetricLimitShed counts the attempts the concurrency limit refused, by
	// kind and criticality.
	MetricLimitShed = "gotry_limit_shed_total"
)

// Label names. LabelJob and LabelInstance are target labels that Prometheus
// adds at scrape time; LabelScope is added by the exporter; the others are
// metric attributes.
const (
	LabelJob      = "job"
	LabelInstance = "instance"
	LabelScope    = "otel_scope_name"
	// LabelBucket is the upper bound label of histogram _bucket series.
	LabelBucket = "le"

	LabelMethod     = "http_request_method"
	LabelServer     = "server_address"
	LabelPort       = "server_port"
	LabelStatusCode = "http_response_status_code"
	LabelErrorType  = "error_type"

	LabelReason         = "gotry_reason"
	LabelAttemptKind    = "gotry_attempt_kind"
	LabelAttemptOutcome = "gotry_attempt_outcome"
	LabelRetryTrigger   = "gotry_retry_trigger"
	LabelDelaySource    = "gotry_retry_delay_source"
	LabelTransport      = "gotry_transport"
	LabelHedgeTrigger   = "gotry_hedge_trigger"
	LabelBreakerState   = "gotry_breaker_state"
	LabelBreakerFrom    = "gotry_breaker_from"
	LabelBreakerTo      = "gotry_breaker_to"
	LabelCriticality    = "gotry_criticality"
)

// Values of LabelReason. ReasonSuccess and ReasonNotRetryable end a request
// normally; every other reason is a give-up.
const (
	ReasonSuccess           = "success"
	ReasonNotRetryable      = "not_retryable"
	ReasonAttemptsExhausted = "attempts_exhausted"
	ReasonBudgetExhausted   = "budget_exhausted"
	ReasonCircuitOpen       = "circuit_open"
	ReasonRetryAfterTooLong = "retry_after_too_long"
	ReasonPastDeadline      = "past_deadline"
	ReasonNotIdempotent     = "not_idempotent"
	ReasonBodyNotReplayable = "body_not_replayable"
	ReasonOverloaded        = "overloaded"
	ReasonCanceled          = "canceled"
	ReasonPushback          = "pushback"
)

// Values of LabelAttemptKind.
const (
	KindInitial = "initial"
	KindRetry   = "retry"
	KindHedge   = "hedge"
)

// Values of LabelCriticality: a request's criticality under the
// concurrency limit (sheddable ones are shed first).
const (
	CriticalitySheddable = "sheddable"
	CriticalityDefault   = "default"
	CriticalityCritical  = "critical"
)

// Values of LabelAttemptOutcome. A hedge won when its outcome is
// OutcomeSuccess; the attempts that lost a race end OutcomeCancelled.
const (
	OutcomeSuccess   = "success"
	OutcomeRetryable = "retryable"
	OutcomeFailure   = "failure"
	OutcomeCancelled = "cancelled"
)

// Values of LabelDelaySource.
const (
	DelayBackoff    = "backoff"
	DelayRetryAfter = "retry_after"
	DelayImmediate  = "immediate"
)

// Values of LabelHedgeTrigger: what set a hedge's delay.
const (
	HedgeFixed    = "fixed"
	HedgeAdaptive = "adaptive"
)

// Values of LabelBreakerState, LabelBreakerFrom and LabelBreakerTo.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// Kind is the instrument type of a metric family.
type Kind int

// The instrument types of the contract.
const (
	Counter Kind = iota + 1
	Gauge
	Histogram
)

// String returns "counter", "gauge" or "histogram".
func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "unknown"
}

// Metric describes one metric family of the contract.
type Metric struct {
	// Name is the family name as Prometheus sees it.
	Name string
	// Kind is the instrument type.
	Kind Kind
	// Labels are the attribute labels a series may carry, besides
	// LabelJob, LabelInstance and LabelScope (and LabelBucket on _bucket
	// series). Not every series has every label: error_type, for example, is
	// absent on success.
	Labels []string
}

// SeriesNames returns the series names a family is stored under: three for a
// histogram, one otherwise.
func (m Metric) SeriesNames() []string {
	if m.Kind == Histogram {
		return []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
	}
	return []string{m.Name}
}

// HasLabel reports whether series of m may carry label, counting the target
// and scope labels every series has.
func (m Metric) HasLabel(label string) bool {
	switch label {
	case LabelJob, LabelInstance, LabelScope:
		return true
	}
	for _, l := range m.Labels {
		if l == label {
			return true
		}
	}
	return false
}

// Contract returns every metric family the telemetry package exports, in a
// new slice on each call.
func Contract() []Metric {
	// gotry_transport is optional on every family: it names the transport
	// (telemetry.Name, given to Telemetry.Transport) when a process runs more
	// than one.
	return []Metric{
		{MetricRequestDuration, Histogram, []string{LabelMethod, LabelServer, LabelPort, LabelStatusCode, LabelErrorType, LabelReason, LabelTransport}},
		{MetricAttemptDuration, Histogram, []string{LabelMethod, LabelServer, LabelPort, LabelAttemptKind, LabelAttemptOutcome, LabelStatusCode, LabelErrorType, LabelTransport}},
		{MetricAttempts, Counter, []string{LabelMethod, LabelServer, LabelPort, LabelAttemptKind, LabelAttemptOutcome, LabelTransport}},
		{MetricRetries, Counter, []string{LabelMethod, LabelServer, LabelPort, LabelRetryTrigger, LabelDelaySource, LabelTransport}},
		{MetricHedges, Counter, []string{LabelMethod, LabelServer, LabelPort, LabelHedgeTrigger, LabelTransport}},
		{MetricRetriesSuppressed, Counter, []string{LabelMethod, LabelServer, LabelPort, LabelReason, LabelTransport}},
		{MetricBackoffDelay, Histogram, []string{LabelServer, LabelDelaySource, LabelTransport}},
		{MetricBudgetTokens, Gauge, []string{LabelTransport}},
		{MetricBudgetRefusals, Counter, []string{LabelServer, LabelAttemptKind, LabelTransport}},
		{MetricBreakerState, Gauge, []string{LabelServer, LabelBreakerState, LabelTransport}},
		{MetricBreakerTransitions, Counter, []string{LabelServer, LabelBreakerFrom, LabelBreakerTo, LabelTransport}},
		{MetricBreakerRejections, Counter, []string{LabelServer, LabelTransport}},
		{MetricHedgeDelay, Gauge, []string{LabelServer, LabelTransport}},
		{MetricHedgeMaxExtraLoad, Gauge, []string{LabelTransport}},
		{MetricBreakerStateDuration, Gauge, []string{LabelServer, LabelBreakerState, LabelTransport}},
		{MetricAttemptsInFlight, Gauge, []string{LabelServer, LabelTransport}},
		{MetricRequestRetries, Histogram, []string{LabelMethod, LabelServer, LabelPort, LabelTransport}},
		{MetricRequestTimeLeft, Histogram, []string{LabelMethod, LabelServer, LabelPort, LabelTransport}},
		{MetricHTTPClientDuration, Histogram, []string{LabelMethod, LabelServer, LabelPort, LabelStatusCode, LabelErrorType, LabelTransport}},
		{MetricLimitCurrent, Gauge, []string{LabelServer, LabelTransport}},
		{MetricLimitInFlight, Gauge, []string{LabelServer, LabelTransport}},
		{MetricLimitShed, Counter, []string{LabelServer, LabelAttemptKind, LabelCriticality, LabelTransport}},
	}
}

// LookupSeries returns the family that a series name belongs to, accepting a
// family name or, for histograms, its _bucket, _sum and _count series.
func LookupSeries(name string) (Metric, bool) {
	for _, m := range Contract() {
		for _, s := range m.SeriesNames() {
			if s == name {
				return m, true
			}
		}
	}
	return Metric{}, false
}

// seriesHasLabel is Metric.HasLabel for a series name, adding LabelBucket for
// _bucket series. It reports false for names outside the contract.
func seriesHasLabel(series, label string) bool {
	m, ok := LookupSeries(series)
	if !ok {
		return false
	}
	if label == LabelBucket {
		return m.Kind == Histogram && strings.HasSuffix(series, "_bucket")
	}
	return m.HasLabel(label)
}

// GiveUpReasons returns the LabelReason values that mean gotry gave up: every
// reason except ReasonSuccess and ReasonNotRetryable.
func GiveUpReasons() []string {
	return []string{
		ReasonAttemptsExhausted, ReasonBudgetExhausted, ReasonCircuitOpen,
		ReasonRetryAfterTooLong, ReasonPastDeadline, ReasonNotIdempotent,
		ReasonBodyNotReplayable, ReasonOverloaded, ReasonCanceled, ReasonPushback,
	}
}

// LabelValues returns the closed set of values a label may take, or nil when
// its values are open-ended (hosts, methods, retry triggers, error types).
func LabelValues(label string) []string {
	switch label {
	case LabelReason:
		return append([]string{ReasonSuccess, ReasonNotRetryable}, GiveUpReasons()...)
	case LabelAttemptKind:
		return []string{KindInitial, KindRetry, KindHedge}
	case LabelAttemptOutcome:
		return []string{OutcomeSuccess, OutcomeRetryable, OutcomeFailure, OutcomeCancelled}
	case LabelDelaySource:
		return []string{DelayBackoff, DelayRetryAfter, DelayImmediate}
	case LabelHedgeTrigger:
		return []string{HedgeFixed, HedgeAdaptive}
	case LabelCriticality:
		return []string{CriticalitySheddable, CriticalityDefault, CriticalityCritical}
	case LabelBreakerState, LabelBreakerFrom, LabelBreakerTo:
		return []string{BreakerClosed, BreakerOpen, BreakerHalfOpen}
	case LabelScope:
		return []string{ScopeName}
	}
	return nil
}
