package promexport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
	"github.com/MrVSiK/gotry/telemetry/internal/traffic"
	"github.com/MrVSiK/gotry/transport"
)

// The metric contract as Prometheus sees it: the names the OTel Prometheus
// exporter writes and the attribute labels each family may carry (dots
// become underscores). Dashboards and alerts are built against these.
var promContract = []struct {
	family string
	series []string // histogram: _bucket, _sum, _count
	labels []string
}{
	{"gotry_request_duration_seconds", hist("gotry_request_duration_seconds"),
		[]string{"gotry_transport", "http_request_method", "server_address", "server_port", "http_response_status_code", "error_type", "gotry_reason"}},
	{"gotry_attempt_duration_seconds", hist("gotry_attempt_duration_seconds"),
		[]string{"gotry_transport", "http_request_method", "server_address", "server_port", "gotry_attempt_kind", "gotry_attempt_outcome", "http_response_status_code", "error_type"}},
	{"gotry_attempts_total", nil, []string{"gotry_transport", "http_request_method", "server_address", "server_port", "gotry_attempt_kind", "gotry_attempt_outcome"}},
	{"gotry_retries_total", nil, []string{"gotry_transport", "http_request_method", "server_address", "server_port", "gotry_retry_trigger", "gotry_retry_delay_source"}},
	{"gotry_hedges_total", nil, []string{"gotry_transport", "http_request_method", "server_address", "server_port", "gotry_hedge_trigger"}},
	{"gotry_retries_suppressed_total", nil, []string{"gotry_transport", "http_request_method", "server_address", "server_port", "gotry_reason"}},
	{"gotry_backoff_delay_seconds", hist("gotry_backoff_delay_seconds"), []string{"gotry_transport", "server_address", "gotry_retry_delay_source"}},
	{"gotry_budget_tokens", nil, []string{"gotry_transport"}},
	{"gotry_budget_refusals_total", nil, []string{"gotry_transport", "server_address", "gotry_attempt_kind"}},
	{"gotry_breaker_state", nil, []string{"server_address", "gotry_breaker_state", "gotry_transport"}},
	{"gotry_breaker_transitions_total", nil, []string{"gotry_transport", "server_address", "gotry_breaker_from", "gotry_breaker_to"}},
	{"gotry_breaker_rejections_total", nil, []string{"gotry_transport", "server_address"}},
	{"gotry_hedge_max_extra_load_ratio", nil, []string{"gotry_transport"}},
	{"gotry_hedge_delay_seconds", nil, []string{"gotry_transport", "server_address"}},
	{"gotry_breaker_state_duration_seconds", nil, []string{"server_address", "gotry_breaker_state", "gotry_transport"}},
	{"gotry_attempts_in_flight", nil, []string{"gotry_transport", "server_address"}},
	{"gotry_limit_current", nil, []string{"gotry_transport", "server_address"}},
	{"gotry_limit_in_flight", nil, []string{"gotry_transport", "server_address"}},
	{"gotry_limit_shed_total", nil, []string{"gotry_transport", "server_address", "gotry_attempt_kind", "gotry_criticality"}},
	{"gotry_request_retries", hist("gotry_request_retries"), []string{"gotry_transport", "http_request_method", "server_address", "server_port"}},
	{"gotry_request_time_left_seconds", hist("gotry_request_time_left_seconds"), []string{"gotry_transport", "http_request_method", "server_address", "server_port"}},
	{"http_client_request_duration_seconds", hist("http_client_request_duration_seconds"),
		[]string{"gotry_transport", "http_request_method", "server_address", "server_port", "http_response_status_code", "error_type"}},
}

func hist(name string) []string { return []string{name + "_bucket", name + "_sum", name + "_count"} }

// Scrape a real OTel Prometheus exporter over loopback HTTP, set up by the
// recipe users get (New), and check every contract name and label.
func TestPrometheusNames(t *testing.T) {
	prom, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Shutdown(context.Background()) })
	tel := telemetry.New(telemetry.WithMeterProvider(prom))
	exercise(t, tel)
	// An adaptive transport that has seen a host reports its hedge delay.
	ad := transport.New(base(t), tel.Transport(telemetry.Name("learning")),
		transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 1))
	mustGet(t, ad, newServer(t, status(200)).URL)
	t.Cleanup(func() { runtime.KeepAlive(ad) }) // the gauges hold it weakly
	// A limited transport at its limit sheds a request.
	hb := newHold()
	lim := transport.New(hb, tel.Transport(telemetry.Name("limited")), transport.WithConcurrencyLimit(oneAtATime))
	held := roundTrip(t, lim, "http://pay.test/hold")
	traffic.Await(t, hb.Held, "the held request to reach the base")
	if err := traffic.Await(t, roundTrip(t, lim, "http://pay.test/next"), "the shed request"); err == nil {
		t.Fatal("request at the limit was not shed")
	}
	close(hb.Release)
	if err := traffic.Await(t, held, "the held request"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runtime.KeepAlive(lim) })

	scrape := httptest.NewServer(prom)
	defer scrape.Close()
	client := &http.Client{Transport: base(t)}
	resp, err := client.Get(scrape.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	series := parseExposition(string(body))

	for _, c := range promContract {
		t.Run(c.family, func(t *testing.T) {
			names := c.series
			if names == nil {
				names = []string{c.family}
			}
			allowed := map[string]bool{"otel_scope_name": true, "otel_scope_version": true, "otel_scope_schema_url": true, "le": true}
			for _, l := range c.labels {
				allowed[l] = true
			}
			seen := map[string]bool{}
			for _, n := range names {
				ls, ok := series[n]
				if !ok {
					t.Errorf("series %s not exported", n)
					continue
				}
				for _, set := range ls {
					if set["otel_scope_name"] != telemetry.ScopeName {
						t.Errorf("%s: otel_scope_name=%q, want %q", n, set["otel_scope_name"], telemetry.ScopeName)
					}
					if set["otel_scope_version"] != telemetry.Version {
						t.Errorf("%s: otel_scope_version=%q, want %q", n, set["otel_scope_version"], telemetry.Version)
					}
					for l := range set {
						seen[l] = true
						if !allowed[l] {
							t.Errorf("%s: unexpected label %s", n, l)
						}
					}
				}
			}
			for _, l := range c.labels {
				if !seen[l] {
					t.Errorf("label %s never seen on %s", l, c.family)
				}
			}
		})
	}
	if t.Failed() {
		var names []string
		for n := range series {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("exported series: %s", strings.Join(names, " "))
	}
}

// parseExposition reads the text format: series name → label sets. It
// handles what this exporter writes (no escaped quotes in our values).
func parseExposition(s string) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labels := map[string]string{}
		if rest != "" {
			body, _, _ := strings.Cut(rest, "}")
			for _, kv := range strings.Split(body, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					labels[k] = strings.Trim(v, `"`)
				}
			}
		} else {
			name, _, _ = strings.Cut(line, " ")
		}
		out[name] = append(out[name], labels)
	}
	return out
}

// scrapeValues scrapes h over loopback and returns each series' value by
// its line's name (labels cut), summed over its label sets.
func scrapeValues(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(h)
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
	prom, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Shutdown(context.Background()) })
	tel := telemetry.New(telemetry.WithMeterProvider(prom))
	srv := newServer(t, status(200))
	limit := resilience.ConcurrencyLimit{InitialLimit: 4, MinLimit: 4, MaxLimit: 4, MaxWait: -1}
	a := transport.New(base(t), tel.Transport(), transport.WithRetryBudget(0, 3), transport.WithConcurrencyLimit(limit))
	b := transport.New(base(t), tel.Transport(), transport.WithRetryBudget(0, 5), transport.WithConcurrencyLimit(limit))
	mustGet(t, a, srv.URL)
	mustGet(t, b, srv.URL)
	t.Cleanup(func() { runtime.KeepAlive(a); runtime.KeepAlive(b) }) // the gauges hold them weakly

	got := scrapeValues(t, prom)
	if v := got["gotry_budget_tokens"]; v != 3+5 {
		t.Errorf("gotry_budget_tokens = %v, want 8 (the reserves of 3 and 5)", v)
	}
	if v := got["gotry_limit_current"]; v != 4+4 {
		t.Errorf("gotry_limit_current = %v, want 8 (two limits of 4)", v)
	}
}
