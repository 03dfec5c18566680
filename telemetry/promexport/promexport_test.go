package promexport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/transport"
)

// gotryFamilies are METRICS.md's Prometheus names that a transport which
// retried once records.
var gotryFamilies = []string{
	"gotry_request_duration_seconds",
	"gotry_attempt_duration_seconds",
	"gotry_attempts_total",
	"gotry_retries_total",
	"gotry_request_retries",
	"gotry_budget_tokens",
	"http_client_request_duration_seconds",
}

// retryOnce sends a request through tr to a loopback server that answers
// 503 and then 200, so the transport retries once.
func retryOnce(t *testing.T, tr *transport.Transport) {
	t.Helper()
	srv := newServer(t, status(503), status(200))
	mustGet(t, tr, srv.URL)
}

// scrape GETs h's metrics over loopback HTTP with the Accept header given
// ("" for none) and returns the status, Content-Type and body.
func scrape(t *testing.T, h http.Handler, accept string) (int, string, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := (&http.Client{Transport: base(t)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// The recipe end to end: a transport wired with it makes requests against
// a loopback server, and GET /metrics returns gotry's metrics, in the text
// format by default and in OpenMetrics when the scraper asks.
func TestNewServesGotryMetrics(t *testing.T) {
	prom, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Shutdown(context.Background()) })
	tel := telemetry.New(telemetry.WithMeterProvider(prom))
	tr := transport.New(base(t), tel.Transport(telemetry.Name("inventory")), transport.WithBackoff(resilience.Constant(time.Millisecond)))
	t.Cleanup(func() { runtime.KeepAlive(tr) }) // the gauges hold it weakly
	for range 3 {
		retryOnce(t, tr)
	}

	code, ctype, body := scrape(t, prom, "")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("scrape: %d %q", code, ctype)
	}
	for _, f := range gotryFamilies {
		if !strings.Contains(body, "\n# TYPE "+f+" ") {
			t.Errorf("family %s not served", f)
		}
	}
	if !strings.Contains(body, `gotry_retries_total{`) || !strings.Contains(body, `gotry_transport="inventory"`) {
		t.Errorf("the retries are not counted under gotry_transport=inventory:\n%s", body)
	}

	code, ctype, body = scrape(t, prom, "application/openmetrics-text; version=1.0.0")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "application/openmetrics-text") || !strings.HasSuffix(body, "# EOF\n") {
		t.Errorf("OpenMetrics scrape: %d %q, body ends %q", code, ctype, body[max(0, len(body)-20):])
	}
}

// Given the registry the program serves already, the recipe registers
// there and serves it too.
func TestNewRegistersWithTheGivenRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	prom, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Shutdown(context.Background()) })
	tr := transport.New(base(t), telemetry.New(telemetry.WithMeterProvider(prom)).Transport(), transport.WithBackoff(resilience.Constant(time.Millisecond)))
	t.Cleanup(func() { runtime.KeepAlive(tr) })
	retryOnce(t, tr)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range families {
		got[f.GetName()] = true
	}
	for _, f := range gotryFamilies {
		if !got[f] {
			t.Errorf("family %s not in the given registry", f)
		}
	}
	if _, _, body := scrape(t, prom, ""); !strings.Contains(body, "gotry_attempts_total") {
		t.Error("ServeHTTP does not serve the given registry")
	}
}

// refusing is a Registerer that refuses every collector.
type refusing struct{ prometheus.Registerer }

func (refusing) Register(prometheus.Collector) error { return errors.New("registry full") }

func TestNewFailsWhenTheRegistryRefuses(t *testing.T) {
	prom, err := New(refusing{})
	if prom != nil || err == nil || !strings.HasPrefix(err.Error(), "promexport: ") || !strings.Contains(err.Error(), "registry full") {
		t.Errorf("got %v, %v; want no Provider and an error prefixed promexport: that names the refusal", prom, err)
	}
}

// A Registerer that cannot be read (a wrapper) still receives the metrics;
// ServeHTTP says it cannot serve them rather than serving nothing.
func TestNewWithARegistererItCannotServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	prom, err := New(prometheus.WrapRegistererWith(prometheus.Labels{"team": "shop"}, reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Shutdown(context.Background()) })
	tr := transport.New(base(t), telemetry.New(telemetry.WithMeterProvider(prom)).Transport())
	t.Cleanup(func() { runtime.KeepAlive(tr) })
	retryOnce(t, tr)

	if code, _, body := scrape(t, prom, ""); code != http.StatusInternalServerError || !strings.Contains(body, "not a prometheus.Gatherer") {
		t.Errorf("scrape: %d %q, want 500 naming the problem", code, body)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "gotry_attempts_total" {
			return
		}
	}
	t.Error("gotry_attempts_total not registered through the wrapper")
}

// Options reach the MeterProvider: another reader sees the same metrics.
func TestNewAppliesMeterProviderOptions(t *testing.T) {
	extra := sdkmetric.NewManualReader()
	prom, err := New(nil, sdkmetric.WithReader(extra))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Shutdown(context.Background()) })
	tr := transport.New(base(t), telemetry.New(telemetry.WithMeterProvider(prom)).Transport())
	t.Cleanup(func() { runtime.KeepAlive(tr) })
	retryOnce(t, tr)

	var rm metricdata.ResourceMetrics
	if err := extra.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == telemetry.MetricAttempts {
				return
			}
		}
	}
	t.Errorf("the extra reader did not see %s", telemetry.MetricAttempts)
}
