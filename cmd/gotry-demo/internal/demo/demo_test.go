package demo

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/telemetry"
)

// testConfig is a short run: faults high enough that every mechanism shows
// within a second or two, and a single payments outage early on, with a
// breaker that opens after 3 failures and probes every 300ms, so it opens
// and closes again. Margins are wide for a loaded 2-core machine under the
// race detector: the outage ends at 1.8s, the run at 3.5s, and the load is
// light (60 req/s).
func testConfig(out io.Writer) Config {
	cfg := DefaultConfig()
	cfg.Duration = 3500 * time.Millisecond
	cfg.Rate = 60
	cfg.Concurrency = 24
	cfg.Seed = 7
	cfg.Faults = Faults{Unavailable: 0.1, TooMany: 0.04, Reset: 0.02, Slow: 0.1, SlowMin: 150 * time.Millisecond, Latency: 2 * time.Millisecond}
	cfg.Outage = Outage{Host: "payments", Start: 300 * time.Millisecond, For: 1500 * time.Millisecond}
	cfg.BreakerThreshold = 3
	cfg.HedgeDelay = 50 * time.Millisecond
	cfg.BreakerOpenFor = 300 * time.Millisecond
	cfg.BudgetReserve = 50
	cfg.RequestTimeout = 3 * time.Second
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.Out = out
	cfg.Refresh = 250 * time.Millisecond
	cfg.WaterfallEvery = time.Second
	cfg.Width = 140
	return cfg
}

// syncBuffer is a bytes.Buffer safe for the view and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// get fetches url with a client whose connections are closed afterwards,
// so no keep-alive goroutine outlives the test.
func get(t *testing.T, url string) string {
	t.Helper()
	return getAccept(t, url, "")
}

// getAccept is get with an Accept header (none when accept is "").
func getAccept(t *testing.T, url, accept string) string {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

func TestRunEndToEnd(t *testing.T) {
	var out syncBuffer
	cfg := testConfig(&out)
	var metrics, openMetrics string
	cfg.AfterTraffic = func(ep Endpoints) {
		metrics = get(t, ep.MetricsURL)
		// What Prometheus asks for when exemplar storage is on.
		openMetrics = getAccept(t, ep.MetricsURL, "application/openmetrics-text;version=1.0.0")
	}

	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	text := out.String()
	t.Logf("output:\n%s", text)
	c := sum.Counters

	t.Run("traffic", func(t *testing.T) {
		if c.Requests < 50 {
			t.Errorf("%d requests, want at least 50", c.Requests)
		}
		if c.Attempts <= c.Requests-c.BreakerRejects {
			t.Errorf("%d attempts for %d requests (%d rejected): no retries or hedges", c.Attempts, c.Requests, c.BreakerRejects)
		}
	})
	t.Run("retries and hedges", func(t *testing.T) {
		if c.Retries == 0 || c.Hedges == 0 || c.HedgeWins == 0 {
			t.Errorf("retries %d, hedges %d, hedge wins %d; want all > 0", c.Retries, c.Hedges, c.HedgeWins)
		}
	})
	t.Run("the upstream sees the attempt header", func(t *testing.T) {
		if sum.Seen["initial"] == 0 || sum.Seen["retry"] == 0 || sum.Seen["hedge"] == 0 {
			t.Errorf("upstream saw %v by %s; want initial, retry and hedge attempts", sum.Seen, AttemptHeader)
		}
		if !strings.Contains(text, "saw by "+AttemptHeader+": ") {
			t.Errorf("the summary does not show what the upstream saw by %s", AttemptHeader)
		}
	})
	t.Run("breaker opened and closed", func(t *testing.T) {
		var pay BreakerRow
		for _, b := range sum.Breakers {
			if b.Host == "payments" {
				pay = b
			}
		}
		if pay.Opens < 1 || pay.Closes < 1 || pay.State != resilience.BreakerClosed {
			t.Errorf("payments breaker %+v; want opened, closed again, and closed at the end", pay)
		}
		if c.BreakerRejects == 0 || c.Reasons["circuit_open"] == 0 {
			t.Errorf("breaker rejections %d, circuit_open give-ups %d; want both > 0", c.BreakerRejects, c.Reasons["circuit_open"])
		}
		if !strings.Contains(text, "circuit breaker state changed") {
			t.Errorf("no breaker move in the log lines")
		}
	})
	t.Run("metrics endpoint", func(t *testing.T) {
		for _, name := range []string{"gotry_attempts_total", "gotry_retries_total", "gotry_hedges_total",
			"gotry_breaker_transitions_total", "gotry_request_duration_seconds_bucket", "gotry_budget_tokens",
			"gotry_hedge_delay_seconds", "gotry_hedge_max_extra_load_ratio", "http_client_request_duration_seconds_bucket",
			"gotry_attempts_in_flight", "gotry_request_retries_bucket", "gotry_breaker_state_duration_seconds",
			"gotry_limit_current", "gotry_limit_in_flight"} {
			if !strings.Contains(metrics, "\n"+name+"{") {
				t.Errorf("/metrics has no %s", name)
			}
		}
		// search is hedged adaptively, the other hosts after the fixed delay.
		for _, want := range []string{`gotry_hedge_delay_seconds{gotry_transport="demo",otel_scope_name="github.com/MrVSiK/gotry/telemetry",otel_scope_schema_url="https://opentelemetry.io/schemas/1.43.0",otel_scope_version="` + telemetry.Version + `",server_address="search"}`,
			`gotry_hedge_trigger="fixed"`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics has no %s", want)
			}
		}
		// Exemplars: latency buckets link to the trace of a request that
		// fell in them, so a click leads from a spike to its waterfall.
		for _, family := range []string{"gotry_request_duration_seconds_bucket", "gotry_attempt_duration_seconds_bucket", "http_client_request_duration_seconds_bucket"} {
			if !exemplarWithTrace(openMetrics, family) {
				t.Errorf("OpenMetrics /metrics: no %s line with a trace_id exemplar", family)
			}
		}
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("promtool not on PATH (scripts/ensure-prometheus.sh installs it)")
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(metrics)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, b)
		}
	})
	t.Run("waterfall", func(t *testing.T) {
		wf := strings.Join(sum.Waterfall, "\n")
		for _, want := range []string{"trace ", "gotry ", " #1 initial", "resend=1", "◆ "} {
			if !strings.Contains(wf, want) {
				t.Errorf("final waterfall lacks %q:\n%s", want, wf)
			}
		}
		if !strings.Contains(wf, " retry ") && !strings.Contains(wf, " hedge ") {
			t.Errorf("final waterfall shows neither a retry nor a hedge:\n%s", wf)
		}
		if !strings.Contains(text, "waterfall: the request with the most attempts in the last 1s") {
			t.Errorf("no periodic waterfall in the output")
		}
	})
	t.Run("view", func(t *testing.T) {
		for _, want := range []string{"metrics   http://127.0.0.1:", "req ", "── summary after", "payments"} {
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.Contains(text, "\x1b[") {
			t.Errorf("plain output contains ANSI escapes")
		}
	})
}

// The live view redraws in place and gives the cursor back at the end.
func TestRunLiveView(t *testing.T) {
	var out syncBuffer
	cfg := testConfig(&out)
	cfg.Duration = time.Second
	cfg.Live = true
	cfg.Outage = Outage{}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("Run: %v", err)
	}
	text := out.String()
	if n := strings.Count(text, ansiHome); n < 3 {
		t.Errorf("%d redraws, want at least 3", n)
	}
	for _, want := range []string{"breakers", "budget tokens", "recent log lines", "finished after", ansiShow + "\n── summary"} {
		if !strings.Contains(text, want) {
			t.Errorf("live output lacks %q", want)
		}
	}
}

// Cancelling the context stops a run with no duration; in-flight requests
// finish and everything shuts down.
func TestRunStopsOnCancel(t *testing.T) {
	var out syncBuffer
	cfg := testConfig(&out)
	cfg.Duration = 0
	cfg.WaterfallEvery = 0
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > cfg.RequestTimeout+5*time.Second {
		t.Errorf("Run took %v after a 700ms context", d)
	}
	if sum.Counters.Requests == 0 {
		t.Errorf("no requests before the cancel")
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, traces (the client's and the
// upstream's, under their service names) and metrics are exported over
// OTLP/HTTP, and flushed at shutdown.
func TestRunExportsOTLP(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[r.URL.Path] = append(bodies[r.URL.Path], b...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "demo-under-test")

	var out syncBuffer
	cfg := testConfig(&out)
	cfg.Duration = time.Second
	cfg.Outage = Outage{}
	cfg.OTLPTraces, cfg.OTLPMetrics = OTLPFromEnv(os.Getenv)
	cfg.MetricExportInterval = 200 * time.Millisecond
	if !cfg.OTLPTraces || !cfg.OTLPMetrics {
		t.Fatalf("OTLPFromEnv = %v, %v; want both on", cfg.OTLPTraces, cfg.OTLPMetrics)
	}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	traces, metrics := string(bodies["/v1/traces"]), string(bodies["/v1/metrics"])
	for _, want := range []string{"demo-under-test", "demo-under-test-upstream", "gotry GET"} {
		if !strings.Contains(traces, want) {
			t.Errorf("exported traces lack %q", want)
		}
	}
	if !strings.Contains(metrics, "gotry.attempts") {
		t.Errorf("exported metrics lack gotry.attempts")
	}
}

func TestOTLPFromEnv(t *testing.T) {
	tests := []struct {
		name            string
		env             map[string]string
		traces, metrics bool
	}{
		{"nothing set", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true, true},
		{"traces only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true, false},
		{"metrics off", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, m := OTLPFromEnv(func(k string) string { return tt.env[k] })
			if tr != tt.traces || m != tt.metrics {
				t.Fatalf("OTLPFromEnv = %v, %v; want %v, %v", tr, m, tt.traces, tt.metrics)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"zero rate", func(c *Config) { c.Rate = 0 }},
		{"no workers", func(c *Config) { c.Concurrency = 0 }},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }},
		{"backoff max below base", func(c *Config) { c.BackoffMax = time.Millisecond }},
		{"bad fault share", func(c *Config) { c.Faults.Slow = 2 }},
		{"outage longer than period", func(c *Config) { c.Outage.Every, c.Outage.For = time.Second, time.Hour }},
		{"burst longer than period", func(c *Config) { c.Burst.Every, c.Burst.For = time.Second, time.Hour }},
		{"burst share above 1", func(c *Config) { c.Burst.Share = 1.5 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(io.Discard)
			tt.edit(&cfg)
			if _, err := Run(context.Background(), cfg); err == nil {
				t.Fatalf("Run accepted an invalid config")
			}
		})
	}
}

// A failure halfway through setup (the metrics port is taken) returns an
// error and still shuts down what had started: goleak checks the rest.
func TestRunMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(io.Discard)
	cfg.MetricsAddr = ln.Addr().String()
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "-metrics-addr") {
		t.Fatalf("Run with a taken metrics port: %v, want an error naming -metrics-addr", err)
	}
}

// With Targets the demo drives the given URLs instead of its own upstream.
func TestRunTargets(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%4 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var out syncBuffer
	cfg := testConfig(&out)
	cfg.Duration = time.Second
	cfg.Targets = []string{srv.URL + "/x"}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if sum.Counters.Requests == 0 || sum.Counters.Retries == 0 || n.Load() <= sum.Counters.Requests {
		t.Errorf("requests %d, retries %d, server saw %d; want retried traffic to the target",
			sum.Counters.Requests, sum.Counters.Retries, n.Load())
	}
	if sum.Served != nil || len(sum.Breakers) != 1 || sum.Breakers[0].Host != host {
		t.Errorf("served %v, breakers %+v; want no upstream and one breaker for %s", sum.Served, sum.Breakers, host)
	}
	if !strings.Contains(out.String(), "targets   "+srv.URL+"/x") {
		t.Errorf("header does not name the target")
	}
}

// TestRunBurstDrainsTheBudget: at the demo's budget ratio (0.1, tighter than
// the library's 0.25), a burst failing 30% of attempts asks for more failed
// retries than the successes pay for, so the budget refuses some: the
// dashboards' budget panels and GotryRetryBudgetExhausted get data.
func TestRunBurstDrainsTheBudget(t *testing.T) {
	cfg := testConfig(io.Discard)
	def := DefaultConfig()
	cfg.BudgetRatio, cfg.BudgetReserve = def.BudgetRatio, def.BudgetReserve
	cfg.Duration = 2 * time.Second
	cfg.Outage = Outage{}
	cfg.Faults = DefaultFaults()
	cfg.Burst = Burst{Share: DefaultBurst().Share, For: 1500 * time.Millisecond}
	cfg.WaterfallEvery = 0
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var burst int64
	for _, byFault := range sum.Served {
		burst += byFault["burst"]
	}
	if burst == 0 {
		t.Errorf("the upstream served no burst 503s: %v", sum.Served)
	}
	if sum.Counters.BudgetRefusals == 0 {
		t.Errorf("no budget refusals during a %g burst at %g req/s: %+v", cfg.Burst.Share, cfg.Rate, sum.Counters)
	}
}

// TestRunCapacityDropIsShed: when search's capacity drops under what the
// load sends it, the concurrency limit sheds the excess: requests end
// "overloaded" without reaching search, the upstream serves what it can,
// and the view, the summary and /metrics show the limit and the sheds.
func TestRunCapacityDropIsShed(t *testing.T) {
	var out syncBuffer
	cfg := testConfig(&out)
	cfg.Hosts = []string{"search"}
	cfg.Outage = Outage{}
	cfg.Faults = Faults{Latency: 2 * time.Millisecond}
	cfg.HedgeDelay = 0 // no hedges: every shed below is a request's own
	cfg.PerAttemptTimeout = 500 * time.Millisecond
	// 60 requests a second against 10 a second served.
	cfg.Drop = Drop{Host: "search", Start: 500 * time.Millisecond, For: 2500 * time.Millisecond, Capacity: 1, Service: 100 * time.Millisecond, Queue: 64}
	cfg.WaterfallEvery = 0
	var metrics string
	cfg.AfterTraffic = func(ep Endpoints) { metrics = get(t, ep.MetricsURL) }
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	text := out.String()
	c := sum.Counters
	if c.ShedInitial == 0 || c.Reasons["overloaded"] == 0 {
		t.Errorf("shed %d initial attempts, %d overloaded give-ups; want both > 0:\n%s", c.ShedInitial, c.Reasons["overloaded"], text)
	}
	if served := sum.Served["search"]; served["capped"] == 0 {
		t.Errorf("search served %v: nothing under the drop", served)
	}
	if len(sum.Limits) != 1 || sum.Limits[0].Host != "search" || sum.Limits[0].Shed < c.ShedInitial || sum.Limits[0].OK == 0 {
		t.Errorf("limit rows %+v, want search's, with its sheds and goodput", sum.Limits)
	}
	for _, want := range []string{" · limit search ", " DROP", "overload  shed ", "drop      search serves 1 at a time"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, want := range []string{"\ngotry_limit_current{", "\ngotry_limit_in_flight{", "\ngotry_limit_shed_total{",
		`gotry_reason="overloaded"`, `error_type="overloaded"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// exemplarWithTrace reports whether an OpenMetrics exposition has a series
// of family with an exemplar carrying a 32-hex-digit trace_id.
func exemplarWithTrace(exposition, family string) bool {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(family) + `\{[^}]*\} \S+ # \{[^}]*trace_id="[0-9a-f]{32}"`)
	return re.MatchString(exposition)
}
