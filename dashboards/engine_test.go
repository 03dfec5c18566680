package dashboards

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// syntheticSeries is a promqltest load block with a few series of every
// metric of the contract, labelled as the exporter labels them: two hosts,
// one with an open breaker, hedging, retries and give-ups.
func syntheticSeries() string {
	target := fmt.Sprintf(`job="checkout", instance="checkout-1:9464", %s=%q`, LabelScope, ScopeName)
	var b strings.Builder
	b.WriteString("load 30s\n")
	add := func(name, labels, values string) {
		fmt.Fprintf(&b, "  %s{%s, %s} %s\n", name, target, labels, values)
	}
	for _, host := range []string{"payments.internal", "search.internal"} {
		h := fmt.Sprintf(`server_address=%q, server_port="443", http_request_method="GET"`, host)
		for _, bucket := range []struct{ le, values string }{{"0.1", "0+10x20"}, {"0.5", "0+40x20"}, {"1", "0+55x20"}, {"+Inf", "0+60x20"}} {
			add(requestBucket, h+`, gotry_reason="success", http_response_status_code="200", le="`+bucket.le+`"`, bucket.values)
			add(attemptBucket, h+`, gotry_attempt_kind="initial", gotry_attempt_outcome="success", http_response_status_code="200", le="`+bucket.le+`"`, bucket.values)
			add(backoffBucket, fmt.Sprintf(`server_address=%q, gotry_retry_delay_source="backoff", le=%q`, host, bucket.le), bucket.values)
		}
		add(requestCount, h+`, gotry_reason="success", http_response_status_code="200"`, "0+60x20")
		add(MetricAttemptsInFlight, fmt.Sprintf(`server_address=%q`, host), "3x20")
		for _, bucket := range []struct{ le, values string }{{"0", "0+50x20"}, {"1", "0+58x20"}, {"+Inf", "0+60x20"}} {
			add(MetricRequestRetries+"_bucket", h+`, le="`+bucket.le+`"`, bucket.values)
		}
		// Time left at the start: a tenth of the requests with under 50 ms.
		for _, bucket := range []struct{ le, values string }{{"0.05", "0+6x20"}, {"0.5", "0+20x20"}, {"5", "0+50x20"}, {"60", "0+58x20"}, {"+Inf", "0+60x20"}} {
			add(timeLeftBucket, h+`, le="`+bucket.le+`"`, bucket.values)
		}
		add(MetricRequestRetries+"_sum", h, "0+12x20")
		add(MetricRequestRetries+"_count", h, "0+60x20")
		add(MetricHTTPClientDuration+"_count", h+`, error_type="503", http_response_status_code="503"`, "0+6x20")
		add(requestCount, h+`, gotry_reason="attempts_exhausted", http_response_status_code="503"`, "0+6x20")
		add(MetricAttempts, h+`, gotry_attempt_kind="initial", gotry_attempt_outcome="success"`, "0+60x20")
		add(MetricAttempts, h+`, gotry_attempt_kind="retry", gotry_attempt_outcome="retryable"`, "0+6x20")
		add(MetricAttempts, h+`, gotry_attempt_kind="hedge", gotry_attempt_outcome="success"`, "0+6x20")
		add(MetricAttempts, h+`, gotry_attempt_kind="hedge", gotry_attempt_outcome="cancelled"`, "0+3x20")
		add(MetricRetries, h+`, gotry_retry_trigger="5xx", gotry_retry_delay_source="backoff"`, "0+6x20")
		add(MetricHedges, h+`, gotry_hedge_trigger="adaptive"`, "0+9x20")
		add(MetricHedgeDelay, fmt.Sprintf(`server_address=%q, gotry_transport="default"`, host), "0.08x20")
		add(MetricRetriesSuppressed, h+`, gotry_reason="budget_exhausted"`, "0+1x20")
		add(MetricBudgetRefusals, fmt.Sprintf(`server_address=%q, gotry_attempt_kind="retry"`, host), "0+1x20")
		add(MetricBreakerTransitions, fmt.Sprintf(`server_address=%q, gotry_breaker_from="closed", gotry_breaker_to="open"`, host), "0+1x20")
		add(MetricBreakerRejections, fmt.Sprintf(`server_address=%q`, host), "0+5x20")
		add(MetricLimitCurrent, fmt.Sprintf(`server_address=%q`, host), "24x20")
		add(MetricLimitInFlight, fmt.Sprintf(`server_address=%q`, host), "24x20")
		add(MetricLimitShed, fmt.Sprintf(`server_address=%q, gotry_attempt_kind="initial", gotry_criticality="default"`, host), "0+4x20")
		add(MetricLimitShed, fmt.Sprintf(`server_address=%q, gotry_attempt_kind="hedge", gotry_criticality="default"`, host), "0+2x20")
		add(requestCount, h+`, gotry_reason="overloaded"`, "0+4x20")
		add(requestCount, h+`, gotry_reason="pushback", http_response_status_code="503", error_type="503"`, "0+2x20")
		add(requestCount, h+`, gotry_reason="past_deadline", http_response_status_code="503", error_type="503"`, "0+1x20")
		add(requestCount, h+`, gotry_reason="canceled", error_type="timeout"`, "0+1x20")
	}
	add(MetricBudgetTokens, `gotry_transport="default"`, "5x20")
	add(MetricHedgeMaxExtraLoad, `gotry_transport="default"`, "0.05x20")
	for _, s := range []struct{ host, state, values string }{
		{"payments.internal", BreakerOpen, "1x20"},
		{"payments.internal", BreakerHalfOpen, "0x20"},
		{"payments.internal", BreakerClosed, "0x20"},
		{"search.internal", BreakerOpen, "0x20"},
		{"search.internal", BreakerHalfOpen, "0x20"},
		{"search.internal", BreakerClosed, "1x20"},
	} {
		add(MetricBreakerState, fmt.Sprintf(`server_address=%q, gotry_breaker_state=%q`, s.host, s.state), s.values)
		if strings.HasPrefix(s.values, "1") {
			add(MetricBreakerStateDuration, fmt.Sprintf(`server_address=%q, gotry_breaker_state=%q`, s.host, s.state), "0+30x20")
		}
	}
	return b.String()
}

// TestQueriesReturnData runs every dashboard query, substituted as a test
// against a real Prometheus would, in Prometheus's own query engine over
// synthetic series shaped like the telemetry's, and expects each to return
// numbers.
func TestQueriesReturnData(t *testing.T) {
	for _, line := range strings.Split(strings.TrimSpace(syntheticSeries()), "\n")[1:] {
		series, _, _ := strings.Cut(strings.TrimSpace(line), "} ")
		lintInputSeries(t, "synthetic", series+"}")
	}
	storage := promqltest.LoadedStorage(t, syntheticSeries())
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 50000)
	at := time.Unix(0, 0).Add(8 * time.Minute)

	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		expr := Substitute(q.Expr)
		query, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, at)
		if err != nil {
			t.Errorf("%s / %s: %v\n\t%s", q.Panel, q.RefID, err, expr)
			continue
		}
		res := query.Exec(context.Background())
		query.Close()
		if res.Err != nil {
			t.Errorf("%s / %s: %v\n\t%s", q.Panel, q.RefID, res.Err, expr)
			continue
		}
		vec, err := res.Vector()
		if err != nil {
			t.Errorf("%s / %s: %v", q.Panel, q.RefID, err)
			continue
		}
		if len(vec) == 0 {
			t.Errorf("%s / %s: no result\n\t%s", q.Panel, q.RefID, expr)
		}
		for _, s := range vec {
			if math.IsNaN(s.F) || math.IsInf(s.F, 0) {
				t.Errorf("%s / %s: %s = %v\n\t%s", q.Panel, q.RefID, s.Metric, s.F, expr)
			}
		}
	}
}

// TestBreakerStateEncoding pins the state timeline's encoding: 2 for open,
// 1 for half-open, 0 for closed.
func TestBreakerStateEncoding(t *testing.T) {
	storage := promqltest.LoadedStorage(t, syntheticSeries())
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 50000)
	expr := Substitute(breakerStateExpr())
	query, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(8*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer query.Close()
	vec, err := query.Exec(context.Background()).Vector()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range vec {
		got[s.Metric.Get(LabelServer)] = s.F
	}
	want := map[string]float64{"payments.internal": 2, "search.internal": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("breaker state codes %v, want %v", got, want)
	}
}
