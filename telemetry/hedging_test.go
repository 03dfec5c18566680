package telemetry

import (
	"go.opentelemetry.io/otel/attribute"

	"runtime"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestHedgeTelemetry: a hedge carries its delay and trigger on its span
// event, gotry.hedges counts it by trigger, and the gauges report an
// adaptive transport's hedge delay per host and its cap on extra load.
func TestHedgeTelemetry(t *testing.T) {
	r := newRig(t)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	tests := []struct {
		name, trigger string
		opt           transport.Option
		delay         float64
	}{
		{"fixed", "fixed", transport.WithHedging(20*time.Millisecond, 1), 0.02},
		// A cold host hedges after MaxDelay.
		{"adaptive", "adaptive", transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05, MaxDelay: 30 * time.Millisecond}, 1), 0.03},
	}
	trs := map[string]*transport.Transport{}
	for _, tc := range tests {
		slow := newServer(t, stall(done), status(200))
		tr := transport.New(base(t), r.tel.Transport(Name(tc.name)), tc.opt, transport.WithMaxAttempts(2))
		trs[tc.name] = tr
		mustGet(t, tr, slow.URL)
	}
	spans := r.waitEnded(t, 6)
	roots := ordered(spans, "gotry GET")
	if len(roots) != 2 {
		t.Fatalf("%d request spans, want 2", len(roots))
	}
	for i, tc := range tests {
		ev := roots[i].Events()
		if len(ev) != 1 || ev[0].Name != EventHedge {
			t.Fatalf("%s: events %v, want one gotry.hedge", tc.name, ev)
		}
		want(t, tc.name+" hedge event", ev[0].Attributes, map[attribute.Key]any{
			keyHedgeDelay: tc.delay, KeyHedgeTrigger: tc.trigger})
	}

	rm := r.collect(t)
	runtime.KeepAlive(trs) // the gauges hold them weakly
	const h = "http.request.method=GET,server.address=127.0.0.1,server.port=P"
	_, ps := find(t, rm, MetricHedges)
	got := sums(ps)
	for k, v := range normalize(map[string]float64{"gotry.hedge.trigger=fixed,gotry.transport=fixed," + h: 1, "gotry.hedge.trigger=adaptive,gotry.transport=adaptive," + h: 1}) {
		if got[k] != v {
			t.Errorf("%s {%s} = %v, want %v (all: %v)", MetricHedges, k, got[k], v, got)
		}
	}
	m, ps := find(t, rm, MetricHedgeDelay)
	if m.Unit != "s" {
		t.Errorf("%s unit %q", MetricHedgeDelay, m.Unit)
	}
	if got, w := sums(ps), map[string]float64{"gotry.transport=adaptive,server.address=127.0.0.1": 0.03}; len(got) != 1 || got["gotry.transport=adaptive,server.address=127.0.0.1"] != w["gotry.transport=adaptive,server.address=127.0.0.1"] {
		t.Errorf("%s = %v, want %v", MetricHedgeDelay, got, w)
	}
	_, ps = find(t, rm, MetricHedgeMaxExtraLoad)
	if got := sums(ps); len(got) != 1 || got["gotry.transport=adaptive"] != 0.05 {
		t.Errorf("%s = %v, want {gotry.transport=adaptive: 0.05}", MetricHedgeMaxExtraLoad, got)
	}
}
