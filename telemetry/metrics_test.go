package telemetry

import (
	"context"
	"errors"
	"maps"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
	"github.com/MrVSiK/gotry/transport"
)

// exercise drives every metric at least once (traffic.Exercise), every
// transport wired with tel.Transport, and with its Name when named:
// "retries", "hedged", "budgeted", "payments" (the breaker), "nobudget"
// and "adaptive". telemetry/promexport drives the same traffic into a real
// Prometheus exporter (TestPrometheusNames).
func exercise(t *testing.T, tel *Telemetry, named bool) {
	t.Helper()
	traffic.Exercise(t, func(name string) transport.Option {
		if named {
			return tel.Transport(Name(name))
		}
		return tel.Transport()
	})
}

// point is one data point, flattened.
type point struct {
	attrs attribute.Set
	value float64 // sum, gauge value or histogram sum
	count uint64  // histogram count
}

func find(t *testing.T, rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, []point) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if sm.Scope.Name != ScopeName {
				t.Errorf("%s: scope %q, want %q", name, sm.Scope.Name, ScopeName)
			}
			var ps []point
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: p.Sum, count: p.Count})
					want := durationBuckets()
					switch name {
					case MetricHTTPClientRequestDuration:
						// The conventions' advisory buckets.
						want = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
					case MetricRequestTimeLeft:
						want = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
					}
					if !equalFloats(p.Bounds, want) {
						t.Errorf("%s: bounds %v, want %v", name, p.Bounds, want)
					}
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{attrs: p.Attributes, value: float64(p.Sum), count: p.Count})
					if !equalFloats(p.Bounds, retryBuckets()) {
						t.Errorf("%s: bounds %v, want %v", name, p.Bounds, retryBuckets())
					}
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
			return m, ps
		}
	}
	t.Fatalf("metric %s not exported", name)
	return metricdata.Metrics{}, nil
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// render writes a point's attributes as "k=v,k=v" (sorted; the server port
// is replaced by "P" so expectations do not depend on it).
func render(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		v := kv.Value.String()
		if kv.Key == keyServerPort {
			v = "P"
		}
		parts = append(parts, string(kv.Key)+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// sums maps rendered attributes to summed values (histograms: counts).
func sums(ps []point) map[string]float64 {
	m := map[string]float64{}
	for _, p := range ps {
		v := p.value
		if p.count > 0 {
			v = float64(p.count)
		}
		m[render(p.attrs)] += v
	}
	return m
}

// normalize sorts the attributes of each hand-written key as render does.
func normalize(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		parts := strings.Split(k, ",")
		sort.Strings(parts)
		out[strings.Join(parts, ",")] = v
	}
	return out
}

func sumCounter(t *testing.T, rm metricdata.ResourceMetrics, name string) int {
	_, ps := find(t, rm, name)
	var n float64
	for _, p := range ps {
		n += p.value
	}
	return int(n)
}

func TestMetricsContract(t *testing.T) {
	r := newRig(t)
	exercise(t, r.tel, false)
	// Hedge losers settle on their own goroutines: wait for every attempt.
	deadline := time.Now().Add(5 * time.Second)
	for sumCounter(t, r.collect(t), MetricAttempts) < 12 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	rm := r.collect(t)

	const h = "http.request.method=GET,server.address=127.0.0.1,server.port=P"
	tests := []struct {
		name, unit string
		// want maps rendered attribute sets to the value expected (sum for
		// counters, count for histograms, value for gauges); sets not
		// listed may exist only if allowed is false.
		want map[string]float64
	}{
		{MetricRequestDuration, "s", map[string]float64{
			"gotry.reason=success,http.response.status_code=200," + h:                           3,
			"error.type=503,gotry.reason=attempts_exhausted,http.response.status_code=503," + h: 3,
			"error.type=503,gotry.reason=budget_exhausted,http.response.status_code=503," + h:   1,
			"error.type=circuit_open,gotry.reason=circuit_open," + h:                            1,
		}},
		{MetricAttemptDuration, "s", map[string]float64{
			"error.type=503,gotry.attempt.kind=initial,gotry.attempt.outcome=retryable,http.response.status_code=503," + h: 5,
			"error.type=429,gotry.attempt.kind=retry,gotry.attempt.outcome=retryable,http.response.status_code=429," + h:   1,
			"error.type=503,gotry.attempt.kind=retry,gotry.attempt.outcome=retryable,http.response.status_code=503," + h:   2,
			"gotry.attempt.kind=retry,gotry.attempt.outcome=success,http.response.status_code=200," + h:                    1,
			"gotry.attempt.kind=initial,gotry.attempt.outcome=cancelled," + h:                                              1,
			"gotry.attempt.kind=hedge,gotry.attempt.outcome=success,http.response.status_code=200," + h:                    1,
			"gotry.attempt.kind=initial,gotry.attempt.outcome=success,http.response.status_code=200," + h:                  1,
		}},
		// The conventions' metric, per physical attempt: a hedge loser has
		// the error.type of its cancellation (ErrorType of the lost-attempt
		// error, whatever that type names it).
		{MetricHTTPClientRequestDuration, "s", map[string]float64{
			"error.type=503,http.response.status_code=503," + h:            7,
			"error.type=429,http.response.status_code=429," + h:            1,
			"http.response.status_code=200," + h:                           3,
			"error.type=" + ErrorType(resilience.ErrAttemptLost) + "," + h: 1,
		}},
		{MetricAttempts, "{attempt}", map[string]float64{
			"gotry.attempt.kind=initial,gotry.attempt.outcome=retryable," + h: 5,
			"gotry.attempt.kind=retry,gotry.attempt.outcome=retryable," + h:   3,
			"gotry.attempt.kind=retry,gotry.attempt.outcome=success," + h:     1,
			"gotry.attempt.kind=initial,gotry.attempt.outcome=cancelled," + h: 1,
			"gotry.attempt.kind=hedge,gotry.attempt.outcome=success," + h:     1,
			"gotry.attempt.kind=initial,gotry.attempt.outcome=success," + h:   1,
		}},
		// The budgeted request's refused retry is no retry: the budget is
		// asked before the backoff, so neither a retry nor a sleep is counted.
		{MetricRetries, "{retry}", map[string]float64{
			"gotry.retry.delay_source=backoff,gotry.retry.trigger=5xx," + h:     3,
			"gotry.retry.delay_source=retry_after,gotry.retry.trigger=429," + h: 1,
		}},
		// Every attempt has ended: none in flight.
		{MetricAttemptsInFlight, "{attempt}", map[string]float64{"server.address=127.0.0.1": 0}},
		{MetricRequestRetries, "{retry}", map[string]float64{h: 8}},
		// Only the first request, which retries, has a deadline.
		{MetricRequestTimeLeft, "s", map[string]float64{h: 1}},
		{MetricHedges, "{hedge}", map[string]float64{"gotry.hedge.trigger=fixed," + h: 1}},
		{MetricRetriesSuppressed, "{request}", map[string]float64{
			"gotry.reason=attempts_exhausted," + h: 3,
			"gotry.reason=budget_exhausted," + h:   1,
			"gotry.reason=circuit_open," + h:       1,
		}},
		{MetricBackoffDelay, "s", map[string]float64{
			"gotry.retry.delay_source=backoff,server.address=127.0.0.1":     3,
			"gotry.retry.delay_source=retry_after,server.address=127.0.0.1": 1,
		}},
		{MetricBudgetRefusals, "{attempt}", map[string]float64{
			"gotry.attempt.kind=retry,server.address=127.0.0.1": 1,
		}},
		{MetricBreakerTransitions, "{transition}", map[string]float64{
			"gotry.breaker.from=closed,gotry.breaker.to=open,server.address=127.0.0.1":      2,
			"gotry.breaker.from=open,gotry.breaker.to=half-open,server.address=127.0.0.1":   1,
			"gotry.breaker.from=half-open,gotry.breaker.to=closed,server.address=127.0.0.1": 1,
		}},
		{MetricBreakerRejections, "{request}", map[string]float64{"server.address=127.0.0.1": 1}},
		{MetricBreakerState, "", map[string]float64{
			"gotry.breaker.state=closed,server.address=127.0.0.1":    0,
			"gotry.breaker.state=open,server.address=127.0.0.1":      1,
			"gotry.breaker.state=half-open,server.address=127.0.0.1": 0,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := find(t, rm, tc.name)
			if m.Unit != tc.unit {
				t.Errorf("unit %q, want %q", m.Unit, tc.unit)
			}
			got := sums(ps)
			tc.want = normalize(tc.want)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("{%s} = %v (present %v), want %v", k, g, ok, v)
				}
			}
			for k := range got {
				if _, ok := tc.want[k]; !ok {
					t.Errorf("unexpected series {%s} = %v", k, got[k])
				}
			}
		})
	}

	t.Run(MetricBudgetTokens, func(t *testing.T) {
		m, ps := find(t, rm, MetricBudgetTokens)
		if m.Unit != "{token}" {
			t.Errorf("unit %q", m.Unit)
		}
		// Unnamed, the four transports with a budget share one series.
		if len(ps) != 1 || ps[0].attrs.Len() != 0 || ps[0].value < 0 {
			t.Fatalf("series %v, want one without attributes", sums(ps))
		}
	})

	t.Run("never a URL, path or attempt number", func(t *testing.T) {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				_, ps := find(t, rm, m.Name)
				for _, p := range ps {
					for _, k := range []attribute.Key{keyURLFull, keyAttempt, keyResendCount, "url.path"} {
						if p.attrs.HasValue(k) {
							t.Errorf("%s carries %s", m.Name, k)
						}
					}
				}
			}
		}
	})
}

// The generic Retrier's metrics carry gotry.operation instead of HTTP
// attributes.
func TestMetricsRetrier(t *testing.T) {
	r := newRig(t)
	rt := resilience.NewRetrier(r.tel.Retrier(Name("jobs")),
		resilience.WithBackoff(resilience.Constant(time.Millisecond)), resilience.WithMaxAttempts(2),
		resilience.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}))
	_, _ = resilience.Retry(t.Context(), rt, "sync-users", func(context.Context) (int, error) { return 0, errors.New("down") })
	rm := r.collect(t)
	runtime.KeepAlive(rt) // the gauges hold it weakly

	// Time in state runs on the real clock here: just opened.
	_, ps := find(t, rm, MetricBreakerStateDuration)
	const openKey = "gotry.breaker.state=open,gotry.operation=sync-users,gotry.transport=jobs"
	if got := sums(ps); len(got) != 1 || got[openKey] < 0 || got[openKey] > 60 || !hasKey(got, openKey) {
		t.Errorf("%s = %v, want {%s} just opened", MetricBreakerStateDuration, got, openKey)
	}

	want := map[string]map[string]float64{
		MetricAttempts: {
			"gotry.attempt.kind=initial,gotry.attempt.outcome=retryable,gotry.operation=sync-users,gotry.transport=jobs": 1,
		},
		MetricRetriesSuppressed: {"gotry.operation=sync-users,gotry.reason=circuit_open,gotry.transport=jobs": 1},
		MetricRetries:           {"gotry.operation=sync-users,gotry.retry.delay_source=backoff,gotry.retry.trigger=_OTHER,gotry.transport=jobs": 1},
		MetricBreakerTransitions: {
			"gotry.breaker.from=closed,gotry.breaker.to=open,gotry.operation=sync-users,gotry.transport=jobs": 1,
		},
		MetricBreakerRejections: {"gotry.operation=sync-users,gotry.transport=jobs": 1},
		MetricRequestDuration:   {"error.type=_OTHER,gotry.operation=sync-users,gotry.reason=circuit_open,gotry.transport=jobs": 1},
		MetricBreakerState: {
			"gotry.breaker.state=closed,gotry.operation=sync-users,gotry.transport=jobs":    0,
			"gotry.breaker.state=open,gotry.operation=sync-users,gotry.transport=jobs":      1,
			"gotry.breaker.state=half-open,gotry.operation=sync-users,gotry.transport=jobs": 0,
		},
	}
	wantSums(t, rm, want)
}

// Past the host limit, new hosts are "other" without a port.
func TestHostLimit(t *testing.T) {
	r := newRig(t, WithHostLimit(1))
	a, b := newServer(t, status(200)), newServer(t, status(200))
	tr := transport.New(base(t), r.tel.Transport())
	mustGet(t, tr, a.URL)
	mustGet(t, tr, strings.Replace(b.URL, "127.0.0.1", "localhost", 1))
	_, ps := find(t, r.collect(t), MetricAttempts)
	got := sums(ps)
	for _, k := range []string{
		"gotry.attempt.kind=initial,gotry.attempt.outcome=success,http.request.method=GET,server.address=127.0.0.1,server.port=P",
		"gotry.attempt.kind=initial,gotry.attempt.outcome=success,http.request.method=GET,server.address=other",
	} {
		if got[k] != 1 {
			t.Errorf("{%s} = %v, want 1 (have %v)", k, got[k], got)
		}
	}
}

func TestHostGuard(t *testing.T) {
	g := hostGuard{limit: 2, label: func(h string) string { return strings.TrimPrefix(h, "eu.") }}
	for _, tc := range []struct {
		host, want string
		real       bool
	}{
		{"a", "a", true},
		{"eu.a", "a", true},
		{"b", "b", true},
		{"c", OtherHost, false},
		{"a", "a", true},
	} {
		if got, real := g.get(tc.host); got != tc.want || real != tc.real {
			t.Errorf("get(%q) = %q, %v; want %q, %v", tc.host, got, real, tc.want, tc.real)
		}
	}
}

// TestNamedHooks: with Name every metric carries gotry.transport, so
// two downstreams' series never merge.
func TestNamedHooks(t *testing.T) {
	r := newRig(t)
	exercise(t, r.tel, true)
	rm := r.collect(t)
	names := map[string]bool{"retries": true, "hedged": true, "budgeted": true, "payments": true, "adaptive": true}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			_, ps := find(t, rm, m.Name)
			for _, p := range ps {
				if v, ok := p.attrs.Value(KeyTransport); !ok || !names[v.AsString()] {
					t.Errorf("%s {%s}: no gotry.transport of this test", m.Name, render(p.attrs))
				}
			}
		}
	}
	for _, n := range []string{MetricRequestDuration, MetricAttemptDuration, MetricAttempts, MetricRetries, MetricHedges,
		MetricRetriesSuppressed, MetricBackoffDelay, MetricBudgetRefusals, MetricBreakerTransitions, MetricBreakerRejections,
		MetricBudgetTokens, MetricBreakerState, MetricBreakerStateDuration, MetricHedgeMaxExtraLoad} {
		if !seen[n] {
			t.Errorf("%s not recorded", n)
		}
	}
	// Each transport with a budget has its own gotry.budget.tokens series;
	// the budget-less ones have none.
	_, ps := find(t, rm, MetricBudgetTokens)
	got := map[string]bool{}
	for _, p := range ps {
		name, _ := p.attrs.Value(KeyTransport)
		got[name.AsString()] = true
	}
	if want := map[string]bool{"retries": true, "hedged": true, "budgeted": true, "payments": true}; !maps.Equal(got, want) {
		t.Errorf("%s series for %v, want %v", MetricBudgetTokens, got, want)
	}
}

// gotry.request.retries adds up to the retries made: each request records
// how many it made, so the sum is the retries that were not refused.
func TestRequestRetriesSum(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(503), status(503), status(200), status(200))
	tr := transport.New(base(t), r.tel.Transport(), transport.WithBackoff(resilience.Constant(time.Millisecond)))
	mustGet(t, tr, srv.URL) // two retries
	mustGet(t, tr, srv.URL) // none
	_, ps := find(t, r.collect(t), MetricRequestRetries)
	if len(ps) != 1 || ps[0].count != 2 || ps[0].value != 2 {
		t.Fatalf("%s: %+v, want 2 requests with 2 retries in all", MetricRequestRetries, ps)
	}
}

// gotry.request.time_left records, once for each request whose context has
// a deadline, what was left of it at the start, read on the transport's
// clock (a fake one here, which never moves, so the value is exact), with
// the request's span sampled or not; a request without a deadline records
// nothing.
func TestRequestTimeLeft(t *testing.T) {
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	tests := []struct {
		name      string
		opts      []Option
		deadlines []time.Duration // one request each, in order; 0: none
		count     uint64
		sum       float64
		buckets   map[float64]uint64 // upper bound -> count, the buckets not empty
	}{
		{"a deadline", nil, []time.Duration{20 * time.Second}, 1, 20, map[float64]uint64{30: 1}},
		{"no deadline", nil, []time.Duration{0}, 0, 0, nil},
		{"only the requests with a deadline", nil, []time.Duration{20 * time.Second, 0, 2500 * time.Millisecond}, 2, 22.5,
			map[float64]uint64{2.5: 1, 30: 1}},
		{"past the last bound", nil, []time.Duration{90 * time.Second}, 1, 90, map[float64]uint64{math.Inf(1): 1}},
		{"an unsampled request", []Option{WithTracerProvider(unsampled)}, []time.Duration{20 * time.Second}, 1, 20,
			map[float64]uint64{30: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.opts...)
			srv := newServer(t, status(200))
			fc := clock.NewFake(time.Now())
			tr := transport.New(base(t), r.tel.Transport(), transport.WithClock(fc))
			for _, d := range tc.deadlines {
				ctx := t.Context()
				if d > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, fc.Now().Add(d))
					t.Cleanup(cancel)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				drain(t, resp)
			}
			ps := timeLeftPoints(t, r.collect(t))
			if tc.count == 0 {
				if len(ps) != 0 {
					t.Fatalf("%s: %d series, want none", MetricRequestTimeLeft, len(ps))
				}
				return
			}
			if len(ps) != 1 {
				t.Fatalf("%s: %d series, want one", MetricRequestTimeLeft, len(ps))
			}
			p := ps[0]
			if p.Count != tc.count || p.Sum != tc.sum {
				t.Errorf("%s: %d requests summing to %vs, want %d summing to %vs", MetricRequestTimeLeft, p.Count, p.Sum, tc.count, tc.sum)
			}
			if got := nonEmptyBuckets(p); !maps.Equal(got, tc.buckets) {
				t.Errorf("%s: buckets %v, want %v", MetricRequestTimeLeft, got, tc.buckets)
			}
			const identity = "http.request.method=GET,server.address=127.0.0.1,server.port=P"
			if got := render(p.Attributes); got != identity {
				t.Errorf("%s: attributes {%s}, want {%s}", MetricRequestTimeLeft, got, identity)
			}
		})
	}
}

// timeLeftPoints returns the data points of gotry.request.time_left (its
// bounds checked by find), none when nothing was recorded.
func timeLeftPoints(t *testing.T, rm metricdata.ResourceMetrics) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricRequestTimeLeft {
				find(t, rm, m.Name)
				return m.Data.(metricdata.Histogram[float64]).DataPoints
			}
		}
	}
	return nil
}

// nonEmptyBuckets maps the upper bound (+Inf for the last) of each bucket of
// p holding values to how many it holds.
func nonEmptyBuckets(p metricdata.HistogramDataPoint[float64]) map[float64]uint64 {
	out := map[float64]uint64{}
	for i, n := range p.BucketCounts {
		if n == 0 {
			continue
		}
		le := math.Inf(1)
		if i < len(p.Bounds) {
			le = p.Bounds[i]
		}
		out[le] = n
	}
	return out
}

// gotry.breaker.state.duration says how long each host's breaker has been
// in its state, by the transport's clock; a breaker whose open period ended
// reads half-open since then.
func TestBreakerStateDuration(t *testing.T) {
	r := newRig(t)
	fc := clock.NewFake(time.Unix(1000, 0))
	srv := newServer(t, status(503))
	tr := transport.New(base(t), r.tel.Transport(Name("payments")), transport.WithMaxAttempts(1), transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Minute}))
	mustGet(t, tr, srv.URL)
	for _, tc := range []struct {
		advance time.Duration
		want    string
		secs    float64
	}{
		{40 * time.Second, "open", 40},
		{30 * time.Second, "half-open", 10},
	} {
		fc.Advance(tc.advance)
		m, ps := find(t, r.collect(t), MetricBreakerStateDuration)
		if m.Unit != "s" {
			t.Errorf("unit %q", m.Unit)
		}
		key := "gotry.breaker.state=" + tc.want + ",gotry.transport=payments,server.address=127.0.0.1"
		if got := sums(ps); len(got) != 1 || got[key] != tc.secs {
			t.Errorf("after %v more: %v, want {%s} = %v", tc.advance, got, key, tc.secs)
		}
	}
	runtime.KeepAlive(tr) // the gauges hold it weakly
}

func hasKey(m map[string]float64, k string) bool { _, ok := m[k]; return ok }

// gotry.attempts.in_flight counts the attempts running at a collection, per
// host, and is still a non-monotonic sum (an up-down counter) after the
// change from synchronous measurements to gotry's own counts.
func TestAttemptsInFlightAtCollection(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // a failure below still lets the held requests go
	srv := newServer(t, stall(release))
	tr := transport.New(base(t), r.tel.Transport())
	const n = 3
	errs := make(chan error, n)
	for range n {
		go func() {
			resp, err := get(t, tr, srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	inFlight := func() (metricdata.Metrics, map[string]float64) {
		m, ps := find(t, r.collect(t), MetricAttemptsInFlight)
		return m, sums(ps)
	}
	// Until the first attempt starts, there is no data point at all.
	started := func() bool {
		for _, sm := range r.collect(t).ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == MetricAttemptsInFlight {
					return true
				}
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if started() {
			if _, got := inFlight(); got["server.address=127.0.0.1"] == n {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("in flight never reached %d for 127.0.0.1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	unblock()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	m, got := inFlight()
	if want := map[string]float64{"server.address=127.0.0.1": 0}; !maps.Equal(got, want) {
		t.Errorf("after the requests: %v, want %v", got, want)
	}
	if s, ok := m.Data.(metricdata.Sum[int64]); !ok || s.IsMonotonic {
		t.Errorf("data %T (monotonic %v), want a non-monotonic Sum[int64]", m.Data, ok && s.IsMonotonic)
	}
}

// Past cacheLimit attribute sets, attempts are still counted, under
// otel.metric.overflow=true (as the SDK folds sets past its cardinality
// limit), and never lost.
func TestAttemptsInFlightOverflow(t *testing.T) {
	r := newRig(t, WithHostLimit(0))
	r.tel.inFlight.cells.n.Store(cacheLimit) // as if full
	c := &call{hs: &hookSet{t: r.tel}, method: "GET", mhost: "new.example", mport: 443}
	cell := c.attemptStarted()
	_, ps := find(t, r.collect(t), MetricAttemptsInFlight)
	if got, want := sums(ps), map[string]float64{"otel.metric.overflow=true": 1}; !maps.Equal(got, want) {
		t.Errorf("in flight %v, want %v", got, want)
	}
	c.attemptEnded(cell)
	_, ps = find(t, r.collect(t), MetricAttemptsInFlight)
	if got, want := sums(ps), map[string]float64{"otel.metric.overflow=true": 0}; !maps.Equal(got, want) {
		t.Errorf("after the end: %v, want %v", got, want)
	}
}

// The option cache's memo of the latest entry never answers for another
// key: keys that alternate each get their own value, and a value built while
// the cache is full is reported as not kept and does not become the memo.
func TestCacheMemo(t *testing.T) {
	var c cache[string, int]
	builds := 0
	build := func(v int) func() int { return func() int { builds++; return v } }
	for range 3 {
		for k, v := range map[string]int{"a": 1, "b": 2} {
			if got, kept := c.get(k, build(v)); got != v || !kept {
				t.Fatalf("get(%q) = %d, %v; want %d, true", k, got, kept, v)
			}
		}
	}
	if builds != 2 {
		t.Errorf("%d builds for two keys, want 2", builds)
	}
	c.n.Store(cacheLimit) // as if full
	if got, kept := c.get("c", build(3)); got != 3 || kept {
		t.Errorf("get(c) on a full cache = %d, %v; want 3, false", got, kept)
	}
	if got, _ := c.get("a", build(-1)); got != 1 {
		t.Errorf("get(a) after an unkept value = %d, want 1", got)
	}
}

// The gauges hold their transports weakly: one the program dropped stops
// being reported once it is collected, with nothing to unregister, while
// one still in use goes on.
func TestGaugesForgetCollectedTransports(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	kept := transport.New(base(t), r.tel.Transport(Name("kept")))
	func() {
		dropped := transport.New(base(t), r.tel.Transport(Name("dropped")))
		mustGet(t, dropped, srv.URL)
	}()
	series := func() map[string]bool {
		_, ps := find(t, r.collect(t), MetricBudgetTokens)
		got := map[string]bool{}
		for _, p := range ps {
			name, _ := p.attrs.Value(KeyTransport)
			got[name.AsString()] = true
		}
		return got
	}
	if got := series(); !got["kept"] || !got["dropped"] {
		t.Fatalf("before a collection: series for %v, want kept and dropped", got)
	}
	for range 3 { // pooled state lets go of it over two cycles
		runtime.GC()
	}
	if got := series(); !got["kept"] || got["dropped"] {
		t.Errorf("after a collection: series for %v, want kept only", got)
	}
	if n := len(r.tel.gauges.sources); n != 1 {
		t.Errorf("%d sources kept, want 1", n)
	}
	runtime.KeepAlive(kept)
}

// streamOp is an Operation of a protocol other than HTTP for the engine
// test: every attempt fails with a retryable answer.
type streamOp struct{}

func (streamOp) Prepare(n int) (int, resilience.EndReason, error) { return n, 0, nil }
func (streamOp) Do(context.Context, resilience.AttemptInfo) (int, error) {
	return 0, errors.New("unavailable")
}
func (streamOp) Classify(_ int, err error, _ resilience.AttemptInfo) resilience.Verdict {
	return resilience.Verdict{Retryable: err != nil}
}
func (streamOp) Retain(_ context.Context, v int) int { return v }
func (streamOp) Release(int)                         {}

// An Engine a user builds is instrumented as a Retrier is (issue #29: it
// could not be at all): its calls' metrics and its gauges carry the call
// key as gotry.operation.
func TestMetricsEngine(t *testing.T) {
	r := newRig(t)
	e := resilience.NewEngine(resilience.Settings{BudgetRatio: resilience.Off, BudgetReserve: resilience.Off,
		Breaker: &resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}}, r.tel.Engine(Name("ledger")))
	res := resilience.Execute(t.Context(), e, resilience.Call[int]{Key: "append", Op: streamOp{},
		Policy: resilience.Policy{MaxAttempts: 2, Backoff: resilience.Constant(time.Millisecond)}})
	if res.Err == nil {
		t.Fatal("the call succeeded; want the failure")
	}
	rm := r.collect(t)
	runtime.KeepAlive(e) // the gauges hold it weakly
	want := map[string]map[string]float64{
		MetricAttempts: {
			"gotry.attempt.kind=initial,gotry.attempt.outcome=retryable,gotry.operation=append,gotry.transport=ledger": 1,
		},
		MetricBreakerState: {
			"gotry.breaker.state=closed,gotry.operation=append,gotry.transport=ledger":    0,
			"gotry.breaker.state=open,gotry.operation=append,gotry.transport=ledger":      1,
			"gotry.breaker.state=half-open,gotry.operation=append,gotry.transport=ledger": 0,
		},
	}
	wantSums(t, rm, want)
}

// wantSums checks that each named metric's series sum to the values want
// gives them (series keyed as sums keys them).
func wantSums(t *testing.T, rm metricdata.ResourceMetrics, want map[string]map[string]float64) {
	t.Helper()
	for name, series := range want {
		_, ps := find(t, rm, name)
		got := sums(ps)
		for k, v := range normalize(series) {
			if got[k] != v {
				t.Errorf("%s{%s} = %v, want %v (have %v)", name, k, got[k], v, got)
			}
		}
	}
}
