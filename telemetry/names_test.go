package telemetry

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
	"github.com/MrVSiK/gotry/transport"
)

// exportedNames is every exported name a user filters on (attribute keys,
// span event names, span names, metric names), by its constant's name.
// TestExportedNamesAreWritten checks that this table is every such
// constant the package declares, and that each is written.
var exportedNames = map[string]string{
	"KeyOperation":          string(KeyOperation),
	"KeyTransport":          string(KeyTransport),
	"KeyAttempts":           string(KeyAttempts),
	"KeyRetries":            string(KeyRetries),
	"KeyHedges":             string(KeyHedges),
	"KeyReason":             string(KeyReason),
	"KeyAttemptKind":        string(KeyAttemptKind),
	"KeyAttemptOutcome":     string(KeyAttemptOutcome),
	"KeyRetryTrigger":       string(KeyRetryTrigger),
	"KeyDelaySource":        string(KeyDelaySource),
	"KeyHedgeTrigger":       string(KeyHedgeTrigger),
	"KeyBreakerState":       string(KeyBreakerState),
	"KeyBreakerFrom":        string(KeyBreakerFrom),
	"KeyBreakerTo":          string(KeyBreakerTo),
	"KeyCriticality":        string(KeyCriticality),
	"KeyLimitCurrent":       string(KeyLimitCurrent),
	"KeyLimitInFlight":      string(KeyLimitInFlight),
	"KeyLimitWaited":        string(KeyLimitWaited),
	"KeyAttemptProbe":       string(KeyAttemptProbe),
	"KeyAttemptPushback":    string(KeyAttemptPushback),
	"KeyBackoffRetryAfter":  string(KeyBackoffRetryAfter),
	"KeyBackoffInterrupted": string(KeyBackoffInterrupted),
	"KeyErrorType":          string(KeyErrorType),

	"EventRetry":              EventRetry,
	"EventHedge":              EventHedge,
	"EventBudgetExhausted":    EventBudgetExhausted,
	"EventBreakerReject":      EventBreakerReject,
	"EventBreakerStateChange": EventBreakerStateChange,
	"EventLimitShed":          EventLimitShed,
	"EventLimitWait":          EventLimitWait,

	"BackoffSpanName": BackoffSpanName,

	"MetricHTTPClientRequestDuration": MetricHTTPClientRequestDuration,
	"MetricRequestDuration":           MetricRequestDuration,
	"MetricAttemptDuration":           MetricAttemptDuration,
	"MetricAttempts":                  MetricAttempts,
	"MetricRetries":                   MetricRetries,
	"MetricHedges":                    MetricHedges,
	"MetricRetriesSuppressed":         MetricRetriesSuppressed,
	"MetricBackoffDelay":              MetricBackoffDelay,
	"MetricBudgetTokens":              MetricBudgetTokens,
	"MetricBudgetRefusals":            MetricBudgetRefusals,
	"MetricBreakerState":              MetricBreakerState,
	"MetricBreakerTransitions":        MetricBreakerTransitions,
	"MetricBreakerRejections":         MetricBreakerRejections,
	"MetricHedgeDelay":                MetricHedgeDelay,
	"MetricAttemptsInFlight":          MetricAttemptsInFlight,
	"MetricBreakerStateDuration":      MetricBreakerStateDuration,
	"MetricRequestRetries":            MetricRequestRetries,
	"MetricHedgeMaxExtraLoad":         MetricHedgeMaxExtraLoad,
	"MetricLimitCurrent":              MetricLimitCurrent,
	"MetricLimitInFlight":             MetricLimitInFlight,
	"MetricLimitShed":                 MetricLimitShed,
	"MetricRequestTimeLeft":           MetricRequestTimeLeft,
}

// family is the kind of name a constant holds, from its identifier.
func family(ident string) string {
	for _, p := range []string{"Key", "Event", "Metric"} {
		if strings.HasPrefix(ident, p) {
			return p
		}
	}
	if strings.HasSuffix(ident, "SpanName") {
		return "SpanName"
	}
	return ""
}

// declaredNames returns the exported constants of the package's own
// (non-test) files whose identifiers mark them as names: Key*, Event*,
// Metric*, *SpanName.
func declaredNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	notTest := func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, ".", notTest, parser.SkipObjectResolution) //nolint:staticcheck // one package, no build tags
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, spec := range g.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if n.IsExported() && family(n.Name) != "" {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// written is every name telemetry wrote in a run: span and span event
// attribute keys, span event names, span names, gotry's metric names and
// their attribute keys.
type written struct{ keys, events, spans, metrics map[string]bool }

func (w written) add(t *testing.T, r *rig) {
	t.Helper()
	for _, s := range r.rec.Ended() {
		w.spans[s.Name()] = true
		for _, kv := range s.Attributes() {
			w.keys[string(kv.Key)] = true
		}
		for _, e := range s.Events() {
			w.events[e.Name] = true
			for _, kv := range e.Attributes {
				w.keys[string(kv.Key)] = true
			}
		}
	}
	for _, sm := range r.collect(t).ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			w.metrics[m.Name] = true
			for _, set := range pointSets(m.Data) {
				for _, k := range set {
					w.keys[k] = true
				}
			}
		}
	}
}

// pointSets returns the attribute keys of every data point of d.
func pointSets(d metricdata.Aggregation) [][]string {
	var out [][]string
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, setKeys(p.Attributes.ToSlice()))
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, setKeys(p.Attributes.ToSlice()))
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, setKeys(p.Attributes.ToSlice()))
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, setKeys(p.Attributes.ToSlice()))
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, setKeys(p.Attributes.ToSlice()))
		}
	}
	return out
}

// setKeys returns the keys of kvs.
func setKeys(kvs []attribute.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = string(kv.Key)
	}
	return out
}

// TestExportedNamesAreWritten: every exported name constant is in
// exportedNames (so none is added without this test), no two constants of
// one family hold the same name (one constant per name), and every one is
// what telemetry writes: each Key* is an attribute key of a span, a span
// event or a metric, each Event* a span event's name, each *SpanName a
// span's, each Metric* a metric gotry records, in runs that make every
// one of them happen.
func TestExportedNamesAreWritten(t *testing.T) {
	declared := declaredNames(t)
	var listed []string
	for k := range exportedNames {
		listed = append(listed, k)
	}
	slices.Sort(listed)
	if !slices.Equal(declared, listed) {
		t.Fatalf("exported name constants %v, but the test checks %v: add the new ones to exportedNames", declared, listed)
	}
	byValue := map[string]string{}
	for ident, v := range exportedNames {
		k := family(ident) + " " + v
		if other, dup := byValue[k]; dup {
			t.Errorf("%s and %s are both %s %q: one constant per name", ident, other, family(ident), v)
		}
		byValue[k] = ident
	}

	w := written{keys: map[string]bool{}, events: map[string]bool{}, spans: map[string]bool{}, metrics: map[string]bool{}}
	r := newRig(t)
	exercise(t, r.tel, true) // retries, Retry-After, a hedge, a budget refusal, a breaker's life, the gauges
	namesOverload(t, r)      // a shed and the limit's gauges
	namesLaterRejection(t, r)
	namesInterruptedBackoff(t, r)
	adaptive := transport.New(base(t), r.tel.Transport(Name("adaptive-sent")), transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 1))
	mustGet(t, adaptive, newServer(t, status(200)).URL) // a host for the hedge delay gauge
	peer := transport.New(base(t), r.tel.Transport(Name("peer")), transport.WithHopPeers(func(string) bool { return true }))
	mustGet(t, peer, newServer(t, status(503, transport.PushbackHeader, transport.PushbackRetried)).URL) // a pushback
	rt := resilience.NewRetrier(r.tel.Retrier(Name("jobs")), resilience.WithMaxAttempts(1))
	_, _ = resilience.Retry(t.Context(), rt, "sync", func(context.Context) (int, error) { return 0, errors.New("down") })
	w.add(t, r)
	runtime.KeepAlive(adaptive) // the gauges hold it weakly
	w.add(t, waitForPermit(t))  // a wait for a permit

	for ident, v := range exportedNames {
		var seen map[string]bool
		switch family(ident) {
		case "Key":
			seen = w.keys
		case "Event":
			seen = w.events
		case "SpanName":
			seen = w.spans
		case "Metric":
			seen = w.metrics
		}
		if !seen[v] {
			t.Errorf("%s = %q: written nowhere it should be", ident, v)
		}
	}
}

// namesOverload sheds one request at a limit of one.
func namesOverload(t *testing.T, r *rig) {
	t.Helper()
	b := traffic.NewHoldBase()
	tr := transport.New(b, r.tel.Transport(Name("pay")), transport.WithConcurrencyLimit(traffic.OneAtATime))
	held := traffic.Send(t, tr, "http://pay.test/hold")
	traffic.Await(t, b.Held, "the held request to reach the base")
	if err := traffic.Await(t, traffic.Send(t, tr, "http://pay.test/item"), "the shed request"); !errors.Is(err, resilience.ErrOverloaded) {
		t.Fatalf("request at the limit: %v, want ErrOverloaded", err)
	}
	r.collect(t) // the limit's gauges, while tr lives
	close(b.Release)
	if err := traffic.Await(t, held, "the held request"); err != nil {
		t.Fatal(err)
	}
}

// namesLaterRejection opens a breaker with a request's first attempt, so
// that its retry is rejected.
func namesLaterRejection(t *testing.T, r *rig) {
	t.Helper()
	srv := newServer(t, status(503))
	tr := transport.New(base(t), r.tel.Transport(Name("later")), transport.WithMaxAttempts(2),
		transport.WithBackoff(resilience.Constant(time.Millisecond)),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: time.Hour}))
	resp, err := get(t, tr, srv.URL)
	if err == nil {
		drain(t, resp)
	}
}

// namesInterruptedBackoff cancels a request during its backoff.
func namesInterruptedBackoff(t *testing.T, r *rig) {
	t.Helper()
	srv := newServer(t, status(503))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tr := transport.New(base(t), r.tel.Transport(Name("cancelled")),
		transport.WithBackoff(resilience.Constant(time.Hour)),
		transport.WithHooks(transport.Hooks{OnRetry: func(resilience.RetryEvent) { cancel() }}))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := tr.RoundTrip(req); err == nil {
		drain(t, resp)
	}
}
