package telemetry

import (
	"encoding/hex"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
	"github.com/MrVSiK/gotry/transport"
)

// exemplarTraces returns the trace ids of the exemplars of metric name's
// data points (histograms and sums alike).
func exemplarTraces(rm metricdata.ResourceMetrics, name string) (ids []string, found bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			found = true
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					ids = appendTraces(ids, p.Exemplars)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					ids = appendTraces(ids, p.Exemplars)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ids = appendTraces(ids, p.Exemplars)
				}
			}
		}
	}
	return ids, found
}

// appendTraces appends the exemplars' trace ids, in hex.
func appendTraces[N int64 | float64](ids []string, ex []metricdata.Exemplar[N]) []string {
	for _, e := range ex {
		ids = append(ids, hex.EncodeToString(e.TraceID))
	}
	return ids
}

// TestExemplarsWhereTracesAreLinked: the latency histograms (which the
// dashboards link to Jaeger) carry the request's trace as an exemplar; the
// in-flight count and the retries and time left per request, whose samples
// stand for no request worth opening (the request's duration links its
// trace), and the attempt counter, whose attempts the
// attempt histograms already link, are measured without one (each exemplar
// costs the SDK a clock read and a copy).
func TestExemplarsWhereTracesAreLinked(t *testing.T) {
	r := newRig(t)
	srv := newServer(t, status(200))
	tr := transport.New(base(t), r.tel.Transport())
	traffic.MustGetWithin(t, tr, srv.URL, time.Minute) // a deadline, for the time left
	spans := r.waitEnded(t, 2)
	trace := spans[0].SpanContext().TraceID().String()
	rm := r.collect(t)
	for _, c := range []struct {
		name string
		want bool
	}{
		{MetricRequestDuration, true},
		{MetricAttemptDuration, true},
		{MetricHTTPClientRequestDuration, true},
		{MetricAttempts, false},
		{MetricAttemptsInFlight, false},
		{MetricRequestRetries, false},
		{MetricRequestTimeLeft, false},
	} {
		ids, found := exemplarTraces(rm, c.name)
		if !found {
			t.Errorf("%s: not recorded", c.name)
			continue
		}
		switch {
		case c.want && (len(ids) == 0 || ids[0] != trace):
			t.Errorf("%s: exemplars %v, want the request's trace %s", c.name, ids, trace)
		case !c.want && len(ids) != 0:
			t.Errorf("%s: exemplars %v, want none", c.name, ids)
		}
	}
}
