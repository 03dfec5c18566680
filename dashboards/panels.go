package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Grafana units used by the panels.
const (
	unitReqPerSec = "reqps"
	unitPerSec    = "ops"
	unitRatio     = "percentunit"
	unitSeconds   = "s"
	unitTimes     = "suffix:×"
	unitCount     = "short"
)

// target is one PromQL query of a panel.
type target struct {
	expr   string
	legend string
}

// t is shorthand for a target.
func t(expr, legend string) target { return target{expr: expr, legend: legend} }

// queries turns targets into the SDK's query builders, with ref ids A, B, ...
func queries(ts []target) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for _, q := range queryBuilders(ts) {
		out = append(out, q)
	}
	return out
}

// exemplarQueries is queries that also fetch the exemplars of the
// histograms they read: points carrying the trace_id of a request that fell
// in a bucket, which the Prometheus data source links to the trace in Jaeger
// (exemplarTraceIdDestinations in its provisioning).
func exemplarQueries(ts []target) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for _, q := range queryBuilders(ts) {
		out = append(out, q.Exemplar(true))
	}
	return out
}

func queryBuilders(ts []target) []*prometheus.DataqueryBuilder {
	var out []*prometheus.DataqueryBuilder
	for i, tg := range ts {
		out = append(out, prometheus.NewDataqueryBuilder().
			Datasource(datasource()).
			RefId(string(rune('A'+i))).
			Expr(tg.expr).
			LegendFormat(tg.legend).
			Range())
	}
	return out
}

// step is a threshold: from value on, show color.
type step struct {
	value float64
	color string
}

// steps returns absolute thresholds: base below the first step.
func steps(base string, ss ...step) *dashboard.ThresholdsConfigBuilder {
	ts := []dashboard.Threshold{{Color: base}}
	for _, s := range ss {
		ts = append(ts, dashboard.Threshold{Value: cog.ToPtr(s.value), Color: s.color})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(ts)
}

// graph returns a time series panel.
func graph(title, description, unit string, width uint32, ts ...target) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Targets(queries(ts)).
		Unit(unit).
		Min(0).
		Span(width).
		Height(8).
		FillOpacity(10).
		LineWidth(1).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// single returns a stat panel showing the last value of one query.
func single(title, description, unit string, thresholds *dashboard.ThresholdsConfigBuilder, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Targets(queries([]target{t(expr, title)})).
		Unit(unit).
		Decimals(2).
		Span(4).
		Height(4).
		Thresholds(thresholds).
		Orientation(common.VizOrientationAuto).
		ColorMode(common.BigValueColorModeValue).
		GraphMode(common.BigValueGraphModeArea).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
}

// overviewRow: the health of the client in six numbers and four graphs.
func overviewRow() row {
	all := sumBy(rate(selector(requestCount)))
	giveUps := sumBy(rate(selector(requestCount, giveUp())))
	successes := sumBy(rate(selector(requestCount, eq(LabelReason, ReasonSuccess))))
	attempts := sumBy(rate(selector(MetricAttempts)))
	openBreakers := "count(" + agg("max", selector(MetricBreakerState, eq(LabelBreakerState, BreakerOpen)), LabelJob, LabelServer) + " == 1) or vector(0)"
	return row{title: "Overview", panels: []cog.Builder[dashboard.Panel]{
		single("Request rate",
			"Requests completed per second, whatever their result. One request counts once however many attempts it took.",
			unitReqPerSec, steps("blue"), all),
		single("Success ratio",
			"Share of requests that ended with gotry_reason=\"success\". not_retryable results (a 404, a non-idempotent error) and give-ups count against it.",
			unitRatio, steps("red", step{0.95, "yellow"}, step{0.99, "green"}), div(successes, all)),
		single("Retry amplification",
			"Attempts per request (gotry_attempts_total / requests): 1.0 means no retries or hedges; GotryRetryStorm fires above 1.5.",
			unitTimes, steps("green", step{1.2, "yellow"}, step{1.5, "red"}), div(attempts, all)),
		single("Give-up ratio",
			"Share of requests gotry gave up on: every gotry_reason except success, not_retryable and canceled (the caller's decision): attempts or budget exhausted, circuit open, Retry-After too long, past deadline, ... GotryHighGiveUpRatio fires above 5%.",
			unitRatio, steps("green", step{0.01, "yellow"}, step{0.05, "red"}), div(giveUps, all)),
		single("Request p99",
			"99th percentile of whole-request latency, all attempts and backoff sleeps included.",
			unitSeconds, steps("green"), quantile(0.99, selector(requestBucket))),
		single("Open breakers",
			"Hosts whose circuit breaker is open now (in any job selected).",
			unitCount, steps("green", step{1, "red"}), openBreakers).Decimals(0),
		graph("Requests by result",
			"Requests per second by gotry_reason: success, not_retryable, or why gotry gave up.",
			unitReqPerSec, 12,
			t(sumBy(rate(selector(requestCount)), LabelReason), "{{"+LabelReason+"}}")),
		graph("Request rate by host",
			"Requests per second by server_address.",
			unitReqPerSec, 12,
			t(sumBy(rate(selector(requestCount)), LabelServer), "{{"+LabelServer+"}}")),
		graph("Retry amplification by host",
			"Attempts per request for each host. Retries and hedges both add attempts.",
			unitTimes, 12,
			t(div(sumBy(rate(selector(MetricAttempts)), LabelServer), sumBy(rate(selector(requestCount)), LabelServer)), "{{"+LabelServer+"}}")),
		graph("Give-up ratio by host",
			"Share of each host's requests that gotry gave up on. A host with no give-ups draws no line.",
			unitRatio, 12,
			t(div(sumBy(rate(selector(requestCount, giveUp())), LabelServer), sumBy(rate(selector(requestCount)), LabelServer)), "{{"+LabelServer+"}}")),
	}}
}

// latencyRow: what the caller waits for (the request) against what one
// round trip costs (the attempt). The gap is retries, backoff and hedging.
func latencyRow() row {
	var req, att []target
	for _, q := range []struct {
		q      float64
		legend string
	}{{0.5, "p50"}, {0.95, "p95"}, {0.99, "p99"}} {
		req = append(req, t(quantile(q.q, selector(requestBucket)), q.legend))
		att = append(att, t(quantile(q.q, selector(attemptBucket)), q.legend))
	}
	return row{title: "Latency", panels: []cog.Builder[dashboard.Panel]{
		graph("Request latency",
			"p50/p95/p99 of gotry_request_duration_seconds: the whole request as the caller sees it, every attempt and backoff sleep included. The dots are exemplars: click one for its trace in Jaeger.",
			unitSeconds, 12).Targets(exemplarQueries(req)),
		graph("Attempt latency",
			"p50/p95/p99 of gotry_attempt_duration_seconds: one physical attempt, until response headers or an error. The dots are exemplars: click one for its trace in Jaeger.",
			unitSeconds, 12).Targets(exemplarQueries(att)),
		graph("p99 by host: request vs attempt",
			"Per host, p99 of whole requests against p99 of single attempts. A wide gap means requests wait on retries and backoff. The dots are exemplars: click one for its trace in Jaeger.",
			unitSeconds, 12).Targets(exemplarQueries([]target{
			t(quantile(0.99, selector(requestBucket), LabelServer), "{{"+LabelServer+"}} request"),
			t(quantile(0.99, selector(attemptBucket), LabelServer), "{{"+LabelServer+"}} attempt")})),
		graph("Attempt p95 by kind",
			"p95 of single attempts by gotry_attempt_kind: initial, retry or hedge.",
			unitSeconds, 12,
			t(quantile(0.95, selector(attemptBucket), LabelAttemptKind), "{{"+LabelAttemptKind+"}}")),
		graph("Attempt errors by error.type",
			"Failed physical attempts per second by error_type, from the HTTP client conventions' http_client_request_duration_seconds (the metric OpenTelemetry HTTP dashboards read): a status ≥ 400, a transport error class, or a hedge loser's cancellation.",
			unitPerSec, 24,
			t(sumBy(rate(selector(MetricHTTPClientDuration+"_count", `error_type!=""`)), LabelErrorType), "{{"+LabelErrorType+"}}")),
		heatmap.NewPanelBuilder().
			Title("Request latency distribution").
			Description("Requests per second in each gotry_request_duration_seconds bucket.").
			Datasource(datasource()).
			WithTarget(prometheus.NewDataqueryBuilder().
				Datasource(datasource()).
				RefId("A").
				Expr(sumBy(rate(selector(requestBucket)), LabelBucket)).
				LegendFormat("{{" + LabelBucket + "}}").
				Format(prometheus.PromQueryFormatHeatmap).
				Range()).
			Calculate(false).
			YAxis(heatmap.NewYAxisConfigBuilder().Unit(unitSeconds)).
			Color(heatmap.NewHeatmapColorOptionsBuilder().
				Mode(heatmap.HeatmapColorModeScheme).
				Scheme("Oranges").
				Scale(heatmap.HeatmapColorScaleExponential).
				Exponent(0.5).
				Steps(64).
				Fill("dark-orange").
				Reverse(false)).
			CellGap(1).
			Tooltip(heatmap.NewHeatmapTooltipBuilder().
				Mode(common.TooltipDisplayModeSingle).
				YHistogram(true)).
			Span(24).
			Height(8),
	}}
}

// retriesRow: why retries happen, how long they wait, and which were not
// made.
func retriesRow() row {
	var backoff []target
	for _, q := range []struct {
		q      float64
		legend string
	}{{0.5, "p50"}, {0.95, "p95"}, {0.99, "p99"}} {
		backoff = append(backoff, t(quantile(q.q, selector(backoffBucket), LabelDelaySource), q.legend+" {{"+LabelDelaySource+"}}"))
	}
	return row{title: "Retries", panels: []cog.Builder[dashboard.Panel]{
		graph("Retries by trigger",
			"Retries per second by gotry_retry_trigger: a status class such as 5xx or 429, or an error type such as timeout or connection_reset.",
			unitPerSec, 12,
			t(sumBy(rate(selector(MetricRetries)), LabelRetryTrigger), "{{"+LabelRetryTrigger+"}}")),
		graph("Retries by delay source",
			"Retries per second by where their delay came from: backoff, the server's Retry-After, or immediate.",
			unitPerSec, 12,
			t(sumBy(rate(selector(MetricRetries)), LabelDelaySource), "{{"+LabelDelaySource+"}}")),
		graph("Retries suppressed by reason",
			"Retries gotry wanted but did not make, per second, by gotry_reason: attempts or budget exhausted, circuit open, Retry-After too long, past the deadline, body not replayable, method not idempotent.",
			unitPerSec, 12,
			t(sumBy(rate(selector(MetricRetriesSuppressed)), LabelReason), "{{"+LabelReason+"}}")),
		graph("Backoff delay",
			"p50/p95/p99 of the delays slept before retries, by delay source.",
			unitSeconds, 12, backoff...),
		graph("Attempts by kind and outcome",
			"Attempts per second by gotry_attempt_kind (initial, retry, hedge) and gotry_attempt_outcome (success, retryable, failure, cancelled).",
			unitPerSec, 24,
			t(sumBy(rate(selector(MetricAttempts)), LabelAttemptKind, LabelAttemptOutcome), "{{"+LabelAttemptKind+"}} {{"+LabelAttemptOutcome+"}}")),
		graph("Retries per request",
			"p50/p99 of how many retries a request made (gotry_request_retries; hedges are not retries), and the mean. A p99 at the attempt limit means requests run out of attempts.",
			unitCount, 12,
			t(quantile(0.5, selector(MetricRequestRetries+"_bucket")), "p50"),
			t(quantile(0.99, selector(MetricRequestRetries+"_bucket")), "p99"),
			t(div(sumBy(rate(selector(MetricRequestRetries+"_sum"))), sumBy(rate(selector(MetricRequestRetries+"_count")))), "mean")),
		graph("Attempts in flight by host",
			"Attempts in flight now (gotry_attempts_in_flight), by host: a host whose line climbs is slowing down or being retried into.",
			unitCount, 12,
			t(sumBy(selector(MetricAttemptsInFlight), LabelServer), "{{"+LabelServer+"}}")),
	}}
}

// hedgingRow: how often hedges launch, how often they win, and the attempts
// cancelled because another won.
func hedgingRow() row {
	hedges := selector(MetricAttempts, eq(LabelAttemptKind, KindHedge))
	wins := selector(MetricAttempts, eq(LabelAttemptKind, KindHedge), eq(LabelAttemptOutcome, OutcomeSuccess))
	return row{title: "Hedging", panels: []cog.Builder[dashboard.Panel]{
		graph("Hedge rate",
			"Hedged attempts launched per second, by host.",
			unitPerSec, 8,
			t(sumBy(rate(selector(MetricHedges)), LabelServer), "{{"+LabelServer+"}}")),
		graph("Hedge win ratio",
			"Share of hedged attempts that won the race (gotry_attempt_kind=\"hedge\", gotry_attempt_outcome=\"success\"). Low means hedges add load without cutting latency.",
			unitRatio, 8,
			t(div(sumBy(rate(wins), LabelServer), sumBy(rate(hedges), LabelServer)), "{{"+LabelServer+"}}")),
		graph("Cancelled losers",
			"Attempts cancelled because another attempt of the same request won, per second, by the loser's kind.",
			unitPerSec, 8,
			t(sumBy(rate(selector(MetricAttempts, eq(LabelAttemptOutcome, OutcomeCancelled))), LabelAttemptKind), "{{"+LabelAttemptKind+"}}")),
		graph("Adaptive hedge delay by host",
			"Each host's current hedge delay under adaptive hedging (gotry_hedge_delay_seconds): the latency percentile that keeps hedges within the cap, learned from recent attempts; the cold default until a host has enough samples. When several instances report a host, the longest shows.",
			unitSeconds, 12,
			t(agg("max", selector(MetricHedgeDelay), LabelServer), "{{"+LabelServer+"}}")),
		graph("Extra load against the cap",
			"Hedges per request by trigger (fixed or adaptive delay) against adaptive hedging's cap (gotry_hedge_max_extra_load_ratio, the highest of the transports selected). Adaptive hedges stay under the cap; fixed ones have none.",
			unitRatio, 12,
			t(div(sumBy(rate(selector(MetricHedges)), LabelHedgeTrigger), "scalar("+sumBy(rate(selector(requestCount)))+")"), "{{"+LabelHedgeTrigger+"}}"),
			t(agg("max", selector(MetricHedgeMaxExtraLoad)), "cap")),
	}}
}

// budgetRow: the retry budget's tokens and what it refused.
func budgetRow() row {
	return row{title: "Retry budget", panels: []cog.Builder[dashboard.Panel]{
		graph("Budget tokens",
			"Retries (and hedges) the budget would allow right now, per transport. Requests deposit tokens; each retry or hedge spends one. Only the job filter applies: a budget is shared by all hosts and methods.",
			unitCount, 12,
			t(agg("max", selector(MetricBudgetTokens), LabelJob, LabelInstance, LabelTransport), "{{"+LabelInstance+"}} {{"+LabelTransport+"}}")),
		graph("Budget refusals",
			"Retries and hedges the budget refused per second, by host and attempt kind. Sustained retry refusals fire GotryRetryBudgetExhausted; sustained hedge refusals GotryHedgeBudgetExhausted.",
			unitPerSec, 12,
			t(sumBy(rate(selector(MetricBudgetRefusals)), LabelServer, LabelAttemptKind), "{{"+LabelServer+"}} {{"+LabelAttemptKind+"}}")),
	}}
}

// breakerStateExpr encodes each host's breaker state as a number for the
// state timeline: 0 closed, 1 half-open, 2 open. Every state series is 1 for
// the current state and 0 otherwise, so scaling each by its code and taking
// the max yields the current state's code, and the worst one when several
// instances report the same host.
func breakerStateExpr() string {
	state := func(s string) string { return selector(MetricBreakerState, eq(LabelBreakerState, s)) }
	return agg("max",
		state(BreakerOpen)+" * 2 or "+state(BreakerHalfOpen)+" or "+state(BreakerClosed)+" * 0",
		LabelServer)
}

// breakerMappings shows breakerStateExpr's codes as state names.
func breakerMappings() []dashboard.ValueMapping {
	opt := func(text, color string, index int32) dashboard.ValueMappingResult {
		return dashboard.ValueMappingResult{Text: cog.ToPtr(text), Color: cog.ToPtr(color), Index: cog.ToPtr(index)}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
		Type: dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{
			"0": opt(BreakerClosed, "green", 0),
			"1": opt(BreakerHalfOpen, "yellow", 1),
			"2": opt(BreakerOpen, "red", 2),
		},
	}}}
}

// breakersRow: each host's breaker state over time, how often breakers
// change state, and what open breakers rejected.
func breakersRow() row {
	return row{title: "Circuit breakers", panels: []cog.Builder[dashboard.Panel]{
		statetimeline.NewPanelBuilder().
			Title("Breaker state by host").
			Description("Each host's circuit breaker state over time: closed, half-open (probing) or open (failing fast). When several instances report a host, the worst state shows.").
			Datasource(datasource()).
			Targets(queries([]target{t(breakerStateExpr(), "{{"+LabelServer+"}}")})).
			Mappings(breakerMappings()).
			Thresholds(steps("green")).
			ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)).
			ShowValue(common.VisibilityModeNever).
			MergeValues(true).
			RowHeight(0.9).
			FillOpacity(80).
			Legend(common.NewVizLegendOptionsBuilder().
				ShowLegend(true).
				DisplayMode(common.LegendDisplayModeList).
				Placement(common.LegendPlacementBottom)).
			Tooltip(common.NewVizTooltipOptionsBuilder().
				Mode(common.TooltipDisplayModeSingle).
				Sort(common.SortOrderNone)).
			Span(24).
			Height(8),
		graph("Time in current breaker state",
			"How long each host's breaker has been in its state (gotry_breaker_state_duration_seconds): a breaker open for minutes is a downstream that stays down; the longest when several instances report a host.",
			unitSeconds, 24,
			t(agg("max", selector(MetricBreakerStateDuration), LabelServer, LabelBreakerState), "{{"+LabelServer+"}} {{"+LabelBreakerState+"}}")),
		graph("Breakers by state",
			"How many hosts' breakers are in each state now.",
			unitCount, 8,
			t(agg("count", selector(MetricBreakerState)+" == 1", LabelBreakerState), "{{"+LabelBreakerState+"}}")),
		graph("Breaker transitions",
			"Breaker state changes per second, by host and from → to. Every opening fires GotryBreakerOpened (and GotryBreakerOpen after 2 minutes); frequent opens GotryBreakerFlapping.",
			unitPerSec, 8,
			t(sumBy(rate(selector(MetricBreakerTransitions)), LabelServer, LabelBreakerFrom, LabelBreakerTo), "{{"+LabelServer+"}} {{"+LabelBreakerFrom+"}} → {{"+LabelBreakerTo+"}}")),
		graph("Breaker rejections",
			"Requests failed fast by an open breaker, per second, by host.",
			unitPerSec, 8,
			t(sumBy(rate(selector(MetricBreakerRejections)), LabelServer), "{{"+LabelServer+"}}")),
	}}
}

// overloadRow: each host's adaptive concurrency limit against what is in
// flight under it, what the limit sheds, and the goodput it keeps.
func overloadRow() row {
	shed := selector(MetricLimitShed)
	// Sheds carry no method: per request, both sides are filtered on the
	// labels both carry, so the method filter does not apply.
	failing := selectorLike(MetricLimitShed, requestCount, notIn(LabelAttemptKind, KindHedge))
	requests := selectorLike(requestCount, MetricLimitShed)
	return row{title: "Overload", panels: []cog.Builder[dashboard.Panel]{
		graph("Concurrency limit vs in flight by host",
			"Each host's adaptive concurrency limit (gotry_limit_current, transport.WithConcurrencyLimit) against the attempts in flight under it (gotry_limit_in_flight), summed over the instances selected. In flight at the limit means attempts wait briefly or are shed; a limit that falls says the host got slower or answers 503/429.",
			unitCount, 12,
			t(sumBy(selector(MetricLimitCurrent), LabelServer), "{{"+LabelServer+"}} limit"),
			t(sumBy(selector(MetricLimitInFlight), LabelServer), "{{"+LabelServer+"}} in flight")),
		graph("Shed rate by kind",
			"Attempts the concurrency limit refused per second (gotry_limit_shed_total), by gotry_attempt_kind and gotry_criticality: a shed initial attempt fails its request at once with gotry_reason=\"overloaded\" (nothing sent), a shed retry returns the last result, a shed hedge is not sent. Sustained initial or retry sheds fire GotryLoadShedding.",
			unitPerSec, 12,
			t(sumBy(rate(shed), LabelAttemptKind, LabelCriticality), "{{"+LabelAttemptKind+"}} {{"+LabelCriticality+"}}")),
		graph("Shed per request by host",
			"Initial and retry attempts shed per request, by host (GotryLoadShedding fires above 0.01 for 3 minutes). In steady state, below the host's capacity, the limit sheds nothing. The method filter does not apply: sheds carry no method, so both are counted over every method.",
			unitRatio, 12,
			t(div(sumBy(rate(failing), LabelServer), sumBy(rate(requests), LabelServer)), "{{"+LabelServer+"}}")),
		graph("Goodput vs overloaded by host",
			"Requests answered successfully per second (goodput) against requests failed fast as overloaded, by host: while the limit sheds, goodput should hold at what the host can serve.",
			unitReqPerSec, 12,
			t(sumBy(rate(selector(requestCount, eq(LabelReason, ReasonSuccess))), LabelServer), "{{"+LabelServer+"}} success"),
			t(sumBy(rate(selector(requestCount, eq(LabelReason, ReasonOverloaded))), LabelServer), "{{"+LabelServer+"}} overloaded")),
	}}
}
