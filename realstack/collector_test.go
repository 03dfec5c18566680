package realstack

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/dashboards"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// The stack's shipped files, relative to the repository root.
const (
	collectorConfig  = "examples/otel-collector/otel-collector.yaml"
	prometheusConfig = "examples/otel-collector/prometheus.yml"
	composeFile      = "docker-compose.yml"
)

// Jobs as the shipped prometheus.yml names them: the demo's metrics through
// the collector (job = the OTel service.name, kept by honor_labels) and
// straight from its /metrics.
const (
	jobCollector = "gotry-demo"
	jobDirect    = "gotry-demo-direct"
	// jobStopped is a second app, through the collector only, whose
	// payments host is down for good; the test stops it with its breaker
	// alert firing.
	jobStopped = "gotry-stopped-app"
)

// Timing of the shipped configs that the bounds below are built on.
const (
	// scrapeInterval is prometheus.yml's scrape and evaluation interval.
	scrapeInterval = 5 * time.Second
	// breakerOpenWindow is GotryBreakerOpen's max_over_time range.
	breakerOpenWindow = time.Minute
	// slack absorbs a loaded 2-core machine: a late export, scrape or
	// evaluation.
	slack = 10 * time.Second
)

// TestCollectorStack runs the compose stack's data path with real binaries
// on loopback: the demo in its default run exports OTLP to an OpenTelemetry
// Collector built with ocb from tools/otelcol, running the shipped
// examples/otel-collector/otel-collector.yaml with only its addresses moved
// to loopback; the collector sends traces to Jaeger over OTLP/gRPC and
// re-exports metrics for Prometheus. Prometheus 2.42 (Debian) and Prometheus
// 3 (built from the github.com/prometheus/prometheus module) both run the
// shipped prometheus.yml, with the alert rules, scraping the collector and
// the demo's own /metrics.
//
// It checks that traces reach Jaeger through the collector; that every
// dashboard query and every alert series has data through each path on both
// Prometheus versions after the default run (so no panel is empty); that the
// two paths' counters agree within the pipeline's lag; that the default
// run's burst and outage make GotryRetryBudgetExhausted and GotryBreakerOpen
// pending; and that a stopped app's firing GotryBreakerOpen clears within
// the exporter's metric_expiration plus the alert's window.
func TestCollectorStack(t *testing.T) {
	if testing.Short() {
		t.Skip("real-stack test skipped in -short mode")
	}
	jaegerBin := tool(t, "GOTRY_JAEGER", "scripts/ensure-jaeger.sh")
	otelcolBin := tool(t, "GOTRY_OTELCOL", "scripts/ensure-otelcol.sh")
	prom2, _ := prometheusTools(t) // TestRealStack runs promtool 2.42
	prom3, promtool3 := prometheus3Tools(t)
	dir := t.TempDir()
	alerts := filepath.Join(root, "dashboards", "alerts.yml")

	t.Run("promtool 3 checks and tests the alert rules", func(t *testing.T) {
		run(t, promtool3, "check", "rules", alerts)
		run(t, promtool3, "test", "rules", filepath.Join(root, "dashboards", "alerts_test.yml"))
	})
	t.Run("the collector validates the shipped config", func(t *testing.T) {
		run(t, otelcolBin, "validate", "--config="+filepath.Join(root, collectorConfig))
	})
	expiration := metricExpiration(t)
	exportInterval := composeExportInterval(t)
	t.Logf("metric_expiration %v, the apps' export interval %v", expiration, exportInterval)

	jaegerURL, jaegerGRPC, _ := startJaeger(t, dir, jaegerBin)

	// The collector, on the shipped config with only its addresses moved.
	colGRPC, colHTTP, colProm, colTelemetry := freePort(t), freePort(t), freePort(t), freePort(t)
	colCfg := loopbackCopy(t, dir, collectorConfig, map[string]string{
		"0.0.0.0:4317": "127.0.0.1:" + colGRPC,
		"0.0.0.0:4318": "127.0.0.1:" + colHTTP,
		"jaeger:4317":  "127.0.0.1:" + jaegerGRPC,
		"0.0.0.0:8889": "127.0.0.1:" + colProm,
	})
	start(t, dir, "otelcol", nil, otelcolBin, "--config="+colCfg,
		// The collector's own metrics (an address too: :8888 by default).
		"--set=service.telemetry.metrics.readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: "+colTelemetry+"}}}}]")
	exporterURL := "http://127.0.0.1:" + colProm + "/metrics"
	waitHTTP(t, exporterURL, 60*time.Second)

	// The demo in its default run (60s; only where it listens and exports
	// is set), and the app that will be stopped.
	demoBin := buildDemo(t, dir)
	demoPort := freePort(t)
	otlpEnv := func(service string) []string {
		return []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:" + colHTTP,
			"OTEL_SERVICE_NAME=" + service,
			"OTEL_METRIC_EXPORT_INTERVAL=" + strconv.FormatInt(exportInterval.Milliseconds(), 10),
		}
	}

	// Both Prometheus servers on the shipped prometheus.yml.
	promCfg := loopbackCopy(t, dir, prometheusConfig, map[string]string{
		"otel-collector:8889":                    "127.0.0.1:" + colProm,
		"gotry-demo:9464":                        "127.0.0.1:" + demoPort,
		"/etc/prometheus/rules/gotry-alerts.yml": alerts,
	})
	var proms []promServer
	for _, p := range []struct{ name, bin string }{{"prometheus2", prom2}, {"prometheus3", prom3}} {
		port := freePort(t)
		start(t, dir, p.name, nil, p.bin, "--config.file="+promCfg,
			"--storage.tsdb.path="+filepath.Join(dir, p.name+"-tsdb"), "--web.listen-address=127.0.0.1:"+port)
		s := promServer{url: "http://127.0.0.1:" + port}
		waitHTTP(t, s.url+"/-/ready", 60*time.Second)
		s.name = "Prometheus " + s.version(t)
		proms = append(proms, s)
	}

	t0 := time.Now()
	demo := start(t, dir, "demo", otlpEnv(jobCollector), demoBin, "-plain", "-metrics-addr", "127.0.0.1:"+demoPort)
	stopped := start(t, dir, "stopped-app", otlpEnv(jobStopped), demoBin, "-plain", "-duration", "0",
		"-metrics-addr", "127.0.0.1:0", "-rate", "10", "-waterfall-every", "0", "-burst-share", "0",
		"-outage-start", "0", "-outage-every", "0", "-outage-for", "24h")

	select {
	case <-demo.done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the demo's default 60s run did not end within 3 minutes")
	}
	demoEnd := time.Now()
	t.Logf("the demo's default run took %v", demoEnd.Sub(t0).Round(time.Second))
	// Its final OTLP export (at shutdown) reaches Prometheus within a scrape.
	time.Sleep(2*scrapeInterval + slack)
	end := time.Now()

	t.Run("traces reach Jaeger through the collector", func(t *testing.T) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			ok, why := findRetriedTrace(t, jaegerURL)
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no retried request trace in Jaeger: %s", why)
			}
			time.Sleep(2 * time.Second)
		}
	})

	for _, p := range proms {
		t.Run(p.name, func(t *testing.T) {
			t.Run("every panel and alert series has data through each path", func(t *testing.T) {
				checkEveryQueryHasData(t, p, alerts, t0, end)
			})
			t.Run("the collector path agrees with the direct path", func(t *testing.T) {
				checkPathsAgree(t, p, t0, end, exportInterval)
			})
			t.Run("the default run makes the budget and breaker alerts pending", func(t *testing.T) {
				for _, alert := range []string{"GotryRetryBudgetExhausted", "GotryBreakerOpen"} {
					for _, job := range []string{jobCollector, jobDirect} {
						expr := fmt.Sprintf(`ALERTS{alertname=%q, job=%q}`, alert, job)
						if n := p.rangeSamples(t, expr, t0, end); n == 0 {
							t.Errorf("%s was never pending or firing for job %s during the default run", alert, job)
						}
					}
				}
			})
			t.Run("alert rules evaluate without error", func(t *testing.T) {
				checkRuleHealth(t, p.url, len(alertExprs(t, alerts)))
			})
			t.Run("the Prometheus link run.sh prints works", func(t *testing.T) {
				checkAlertsLink(t, p)
			})
		})
	}

	// The stopped app: GotryBreakerOpen fires for it through the collector
	// (its payments host has been down since it started), then it stops.
	breakerFiring := fmt.Sprintf(`ALERTS{alertname="GotryBreakerOpen", alertstate="firing", job=%q}`, jobStopped)
	breakerActive := fmt.Sprintf(`ALERTS{alertname="GotryBreakerOpen", job=%q}`, jobStopped)
	deadline := t0.Add(6 * time.Minute)
	for !allHave(t, proms, breakerFiring) {
		if time.Now().After(deadline) {
			t.Fatalf("GotryBreakerOpen never fired for %s on both servers", jobStopped)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("GotryBreakerOpen fired for %s %v after it started", jobStopped, time.Since(t0).Round(time.Second))
	if !exporterHas(t, exporterURL, jobStopped) {
		t.Fatalf("the collector's exporter has no series of %s while it runs", jobStopped)
	}
	stopped.stop()
	stopAt := time.Now()

	// Its series leave the collector's exporter after metric_expiration, and
	// the alert clears once GotryBreakerOpen's window has no open sample:
	// not the 5 minutes (plus the window) of the exporter's default.
	goneBound := expiration + exportInterval + slack
	clearBound := expiration + breakerOpenWindow + 2*scrapeInterval + 3*slack
	gone := map[string]time.Duration{}
	for time.Since(stopAt) < clearBound+time.Minute && len(gone) < 1+len(proms) {
		if _, ok := gone["exporter"]; !ok && !exporterHas(t, exporterURL, jobStopped) {
			gone["exporter"] = time.Since(stopAt)
		}
		for _, p := range proms {
			if _, ok := gone[p.name]; !ok && p.count(t, breakerActive) == 0 {
				gone[p.name] = time.Since(stopAt)
			}
		}
		time.Sleep(time.Second)
	}
	t.Run("a stopped app's series leave the exporter within metric_expiration", func(t *testing.T) {
		d, ok := gone["exporter"]
		if !ok || d > goneBound {
			t.Fatalf("the collector still exported %s's series %v after it stopped (bound %v = metric_expiration %v + export interval + slack)",
				jobStopped, time.Since(stopAt).Round(time.Second), goneBound, expiration)
		}
		t.Logf("%s's series left the exporter %v after it stopped", jobStopped, d.Round(time.Second))
	})
	for _, p := range proms {
		t.Run(p.name+": a stopped app's breaker alert clears", func(t *testing.T) {
			d, ok := gone[p.name]
			if !ok || d > clearBound {
				t.Fatalf("GotryBreakerOpen for %s still active %v after it stopped (bound %v = metric_expiration %v + the rule's %v window + 2 evaluations + slack)",
					jobStopped, time.Since(stopAt).Round(time.Second), clearBound, expiration, breakerOpenWindow)
			}
			t.Logf("GotryBreakerOpen for %s cleared %v after it stopped", jobStopped, d.Round(time.Second))
		})
	}
}

// prometheus3Tools returns Prometheus 3's prometheus and promtool:
// $GOTRY_PROMETHEUS3 and $GOTRY_PROMTOOL3 if set, else what
// scripts/ensure-prometheus3.sh builds (cached).
func prometheus3Tools(t *testing.T) (prom, promtool string) {
	t.Helper()
	prom, promtool = os.Getenv("GOTRY_PROMETHEUS3"), os.Getenv("GOTRY_PROMTOOL3")
	if prom != "" && promtool != "" {
		return prom, promtool
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "ensure-prometheus3.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/ensure-prometheus3.sh: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) < 2 {
		t.Fatalf("scripts/ensure-prometheus3.sh printed %q, want two paths", out)
	}
	return lines[len(lines)-2], lines[len(lines)-1]
}

// loopbackCopy writes a copy of the repository file rel to dir with every
// occurrence of each key of addrs replaced by its value, and returns its
// path: the copy differs from the shipped file in those addresses and
// nothing else. Each address must occur in the file.
func loopbackCopy(t *testing.T, dir, rel string, addrs map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for from, to := range addrs {
		if !strings.Contains(text, from) {
			t.Fatalf("%s no longer holds %q: update the test", rel, from)
		}
		text = strings.ReplaceAll(text, from, to)
	}
	out := filepath.Join(dir, filepath.Base(rel))
	if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// metricExpiration reads the prometheus exporter's metric_expiration from
// the shipped collector config.
func metricExpiration(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, collectorConfig))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Exporters struct {
			Prometheus struct {
				MetricExpiration string `yaml:"metric_expiration"`
			} `yaml:"prometheus"`
		} `yaml:"exporters"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	d, err := time.ParseDuration(c.Exporters.Prometheus.MetricExpiration)
	if err != nil {
		t.Fatalf("%s: exporters.prometheus.metric_expiration: %v", collectorConfig, err)
	}
	return d
}

// composeExportInterval reads the demo's OTEL_METRIC_EXPORT_INTERVAL from
// docker-compose.yml, so the test's apps export as the stack's demo does.
func composeExportInterval(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	ms, err := strconv.Atoi(c.Services["gotry-demo"].Environment["OTEL_METRIC_EXPORT_INTERVAL"])
	if err != nil {
		t.Fatalf("%s: gotry-demo's OTEL_METRIC_EXPORT_INTERVAL: %v", composeFile, err)
	}
	return time.Duration(ms) * time.Millisecond
}

// promServer is one running Prometheus.
type promServer struct{ name, url string }

func (p promServer) version(t *testing.T) string {
	var r struct {
		Data struct {
			Version string `json:"version"`
		} `json:"data"`
	}
	if err := getJSON(t, p.url+"/api/v1/status/buildinfo", &r); err != nil {
		t.Fatal(err)
	}
	return r.Data.Version
}

func (p promServer) count(t *testing.T, expr string) int { return promCount(t, p.url, expr) }

// matrix runs a range query from start to end, one step a second.
func (p promServer) matrix(t *testing.T, expr string, start, end time.Time) []sampleStream {
	t.Helper()
	var r struct {
		Data struct {
			Result []sampleStream `json:"result"`
		} `json:"data"`
	}
	q := url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {"1"}}
	if err := getJSON(t, p.url+"/api/v1/query_range?"+q.Encode(), &r); err != nil {
		t.Fatalf("%s: query_range %s: %v", p.name, expr, err)
	}
	return r.Data.Result
}

// rangeSamples returns how many samples a range query returned in all.
func (p promServer) rangeSamples(t *testing.T, expr string, start, end time.Time) int {
	n := 0
	for _, s := range p.matrix(t, expr, start, end) {
		n += len(s.Values)
	}
	return n
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// sampleStream is one series of a range query result.
type sampleStream struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"` // [unix seconds, "value"]
}

// points returns the stream's samples as time → value, by whole second.
func (s sampleStream) points(t *testing.T) map[int64]float64 {
	out := map[int64]float64{}
	for _, v := range s.Values {
		ts, _ := v[0].(float64)
		str, _ := v[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("sample value %v: %v", v[1], err)
		}
		out[int64(math.Round(ts))] = f
	}
	return out
}

// checkEveryQueryHasData asserts that, over the run, every dashboard query
// with the Job variable set to each path's job, and every vector selector
// of every alert rule restricted to that job, returned data: no panel of
// the shipped dashboard is empty for either path.
func checkEveryQueryHasData(t *testing.T, p promServer, alerts string, start, end time.Time) {
	queries, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	rules := alertExprs(t, alerts)
	for _, job := range []string{jobCollector, jobDirect} {
		var empty []string
		panels := map[string]bool{}
		for _, q := range queries {
			panel := q.Row + " / " + q.Panel
			if _, seen := panels[panel]; !seen {
				panels[panel] = false
			}
			expr := dashboards.SubstituteVars(q.Expr, map[string]string{"job": job})
			if p.rangeSamples(t, expr, start, end) == 0 {
				empty = append(empty, fmt.Sprintf("dashboard %s (%s): %s", panel, q.RefID, expr))
				continue
			}
			panels[panel] = true
		}
		for name, expr := range rules {
			for _, sel := range jobSelectors(t, expr, job) {
				if p.rangeSamples(t, sel, start, end) == 0 {
					empty = append(empty, "alert "+name+" selector: "+sel)
				}
			}
		}
		var emptyPanels []string
		for panel, ok := range panels {
			if !ok {
				emptyPanels = append(emptyPanels, panel)
			}
		}
		slices.Sort(emptyPanels)
		if len(emptyPanels) > 0 {
			t.Errorf("job %s: %d of %d panels empty: %s", job, len(emptyPanels), len(panels), strings.Join(emptyPanels, "; "))
		}
		if len(empty) > 0 {
			t.Errorf("job %s: %d expressions returned no data:\n%s", job, len(empty), strings.Join(empty, "\n"))
		}
		t.Logf("job %s: %d panels, %d dashboard queries, the selectors of %d alert rules", job, len(panels), len(queries), len(rules))
	}
}

// jobSelectors returns every vector selector of expr with a job=job matcher
// added, as PromQL text.
func jobSelectors(t *testing.T, expr, job string) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("parse %s: %v", expr, err)
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			sel := *vs
			sel.LabelMatchers = append(slices.Clone(vs.LabelMatchers), labels.MustNewMatcher(labels.MatchEqual, "job", job))
			out = append(out, sel.String())
		}
		return nil
	})
	return out
}

// checkPathsAgree compares, for every counter and histogram count and sum
// of the metric contract, the demo's totals through the collector with its
// totals scraped directly. Both sample the same monotone counters, the
// collector path later: by up to an export interval plus a scrape interval
// (plus slack), the direct path by up to a scrape interval (plus slack). So
// at every second t, each path's total is at most the other's a lag later,
// which pins the collector path to the direct one within that lag; and the
// collector's final total (flushed at shutdown) is at least the direct
// path's last.
func checkPathsAgree(t *testing.T, p promServer, start, end time.Time, exportInterval time.Duration) {
	lagCollector := int64((exportInterval + scrapeInterval + slack) / time.Second)
	lagDirect := int64((scrapeInterval + slack) / time.Second)
	checked := 0
	for _, m := range dashboards.Contract() {
		var names []string
		switch m.Kind {
		case dashboards.Counter:
			names = []string{m.Name}
		case dashboards.Histogram:
			names = []string{m.Name + "_count", m.Name + "_sum"}
		}
		for _, name := range names {
			total := func(job string) map[int64]float64 {
				streams := p.matrix(t, fmt.Sprintf(`sum(%s{job=%q})`, name, job), start, end)
				if len(streams) == 0 {
					return nil
				}
				return streams[0].points(t)
			}
			col, dir := total(jobCollector), total(jobDirect)
			if len(col) == 0 || len(dir) == 0 {
				t.Errorf("%s: %d samples through the collector, %d direct", name, len(col), len(dir))
				continue
			}
			var bad []string
			for ts, d := range dir {
				if c, ok := col[ts+lagCollector]; ok && !atMost(d, c) {
					bad = append(bad, fmt.Sprintf("direct %g at %d > collector %g %ds later", d, ts, c, lagCollector))
				}
			}
			for ts, c := range col {
				if d, ok := dir[ts+lagDirect]; ok && !atMost(c, d) {
					bad = append(bad, fmt.Sprintf("collector %g at %d > direct %g %ds later", c, ts, d, lagDirect))
				}
			}
			if cMax, dMax := maxValue(col), maxValue(dir); !atMost(dMax, cMax) {
				bad = append(bad, fmt.Sprintf("final: collector %g < direct %g", cMax, dMax))
			}
			if len(bad) > 0 {
				slices.Sort(bad)
				t.Errorf("%s: the paths disagree beyond the lag (%d times), e.g.:\n%s", name, len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no metric compared")
	}
	t.Logf("%d series totals agree within the lag (collector ≤ direct %ds later, direct ≤ collector %ds later)", checked, lagDirect, lagCollector)
}

// atMost reports a ≤ b, allowing float rounding of sums.
func atMost(a, b float64) bool { return a <= b+1e-9*math.Max(1, math.Abs(b)) }

func maxValue(m map[int64]float64) float64 {
	out := math.Inf(-1)
	for _, v := range m {
		out = max(out, v)
	}
	return out
}

// allHave reports whether expr returns a series on every server.
func allHave(t *testing.T, proms []promServer, expr string) bool {
	for _, p := range proms {
		if p.count(t, expr) == 0 {
			return false
		}
	}
	return true
}

// exporterHas reports whether the collector's Prometheus exporter still
// exposes a series of job.
func exporterHas(t *testing.T, exporterURL, job string) bool {
	resp, err := http.Get(exporterURL)
	if err != nil {
		t.Fatalf("scraping the collector's exporter: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(body), `job="`+job+`"`)
}

// checkAlertsLink runs the function native/run.sh prints its Prometheus
// link with against p, and checks that the link answers and shows gotry's
// alert rules.
func checkAlertsLink(t *testing.T, p promServer) {
	out, err := exec.Command("bash", "-c", `source "$1" && prometheus_alerts_url "$2"`, "bash",
		filepath.Join(root, "scripts", "lib", "prometheus-url.sh"), p.url).Output()
	if err != nil {
		t.Fatalf("prometheus_alerts_url: %v", err)
	}
	link := strings.TrimSpace(string(out))
	if !strings.HasPrefix(link, p.url+"/") {
		t.Fatalf("link %q is not on %s", link, p.url)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "GotryBreakerOpen") {
		t.Fatalf("%s: %s, and the page does not name GotryBreakerOpen:\n%.300s", link, resp.Status, body)
	}
	if strings.HasPrefix(strings.TrimSpace(string(body)), "{") && !json.Valid(body) {
		t.Fatalf("%s: invalid JSON", link)
	}
	t.Logf("%s links to %s", p.name, link)
}
