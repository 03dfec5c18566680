package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// scrapeValues scrapes a Prometheus handler over loopback and returns each
// series' value by its line's name and labels as written.
func scrapeValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := (&http.Client{Transport: base(t)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		name, _, _ := strings.Cut(line[:i], "{")
		out[name] += v // one series per family here: the families checked carry one label set
	}
	return out
}

// TestGaugesOfSeveralTransportsAddUp: two unnamed transports calling one
// host report, through a real Prometheus exporter, the budget tokens both
// hold and the sum of their limits; an asynchronous gauge keeps one value
// per label set, so reporting each transport on its own kept only the last
// one read, and one budget was lost.
func TestGaugesOfSeveralTransportsAddUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tel := New(WithMeterProvider(mp))
	srv := newServer(t, status(200))
	limit := resilience.ConcurrencyLimit{InitialLimit: 4, MinLimit: 4, MaxLimit: 4, MaxWait: -1}
	a := transport.New(base(t), tel.Transport(), transport.WithRetryBudget(0, 3), transport.WithConcurrencyLimit(limit))
	b := transport.New(base(t), tel.Transport(), transport.WithRetryBudget(0, 5), transport.WithConcurrencyLimit(limit))
	mustGet(t, a, srv.URL)
	mustGet(t, b, srv.URL)
	t.Cleanup(func() { runtime.KeepAlive(a); runtime.KeepAlive(b) }) // the gauges hold them weakly

	got := scrapeValues(t, reg)
	if v := got["gotry_budget_tokens"]; v != 3+5 {
		t.Errorf("gotry_budget_tokens = %v, want 8 (the reserves of 3 and 5)", v)
	}
	if v := got["gotry_limit_current"]; v != 4+4 {
		t.Errorf("gotry_limit_current = %v, want 8 (two limits of 4)", v)
	}
}
