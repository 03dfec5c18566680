package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// errorTypeTimeout is the error_type of a request that ran out of its
// context's deadline (telemetry.ErrorTypeTimeout), which a network timeout
// shares.
const errorTypeTimeout = "timeout"

// chainRow: the hop protocol of transport.Middleware, seen from a caller:
// the answers a peer pushed back (it retried below and still failed), the
// requests that ran out of their deadline, a caller's propagated one
// included, and how much of it requests start with.
func chainRow() row {
	byHost := func(extra ...string) string {
		return sumBy(rate(selector(requestCount, extra...)), LabelServer)
	}
	return row{title: "Chains of services", panels: []cog.Builder[dashboard.Panel]{
		graph("Pushback answers by downstream",
			"Requests per second that ended with gotry_reason=\"pushback\": a hop peer (transport.WithHopPeers) answered a failure with Gotry-Pushback, saying it had retried below and still failed, so this client did not retry it. The answer still counts as a failure for the breaker and the retry budget. A steady line means a host further down the chain fails; a host that is no peer draws none, its pushback being ignored.",
			unitReqPerSec, 12,
			t(byHost(eq(LabelReason, ReasonPushback)), "{{"+LabelServer+"}}")),
		graph("Requests out of time by downstream",
			"Requests per second that ran out of their context's deadline, by host: past_deadline (the next attempt would have started at or after the deadline, so none did) and error_type timeout (the deadline passed during an attempt, or a call to a peer had less than 1 ms left and was not sent; a network timeout has the same error_type). Under transport.Middleware the deadline is the trusted caller's, sent in Gotry-Timeout-Ms, when it is sooner than the service's own: a line that follows the callers rather than the host says they leave this service too little time.",
			unitReqPerSec, 12,
			t(byHost(eq(LabelReason, ReasonPastDeadline)), "{{"+LabelServer+"}} past deadline"),
			t(byHost(eq(LabelErrorType, errorTypeTimeout)), "{{"+LabelServer+"}} timeout")),
		graph("Time left at the start of requests by downstream",
			"The 10th percentile and the median, by host, of what was left of a request's deadline when it started (gotry_request_time_left_seconds; requests without a deadline are not counted). Under transport.Middleware a trusted caller's deadline, sent in Gotry-Timeout-Ms, counts when it is sooner than the service's own. A 10th percentile near the host's request latency, or under a few milliseconds, says callers hand that downstream too little time: those requests end past_deadline or timeout (the panel beside). The histogram's top bucket is 60 s, so longer deadlines show as 60 s.",
			unitSeconds, 24,
			t(quantile(0.1, selector(timeLeftBucket), LabelServer), "{{"+LabelServer+"}} p10"),
			t(quantile(0.5, selector(timeLeftBucket), LabelServer), "{{"+LabelServer+"}} p50")),
	}}
}
