// Package realstack runs the demo against real Jaeger and Prometheus
// processes on loopback and checks that the traces, dashboards and alert
// rules work on what the telemetry really exports.
//
// The tools come from the machine's registries: Prometheus and promtool
// from Debian (scripts/ensure-prometheus.sh), Jaeger built from the Go
// module proxy (scripts/ensure-jaeger.sh, cached). The test starts and stops
// every process itself.
package realstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/dashboards"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// root is the repository root (this module lives one level below it).
var root = func() string { p, _ := filepath.Abs(".."); return p }()

func TestRealStack(t *testing.T) {
	if testing.Short() {
		t.Skip("real-stack test skipped in -short mode")
	}
	jaegerBin := tool(t, "GOTRY_JAEGER", "scripts/ensure-jaeger.sh")
	promBin, promtool := prometheusTools(t)
	dir := t.TempDir()

	// Jaeger on loopback ports of our choosing.
	jaegerURL, _, otlpPort := startJaeger(t, dir, jaegerBin)

	// The demo, exporting traces to Jaeger and serving /metrics.
	demoBin := buildDemo(t, dir)
	metricsPort := freePort(t)
	start(t, dir, "demo", []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:" + otlpPort,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=gotry-demo",
		"OTEL_BSP_SCHEDULE_DELAY=500",
		"OTEL_METRICS_EXPORTER=none", // Prometheus scrapes /metrics instead
	}, demoBin, append([]string{"-plain", "-duration", "150s", "-metrics-addr", "127.0.0.1:" + metricsPort}, demoFlags...)...)
	waitHTTP(t, "http://127.0.0.1:"+metricsPort+"/metrics", 60*time.Second)

	// Prometheus scraping the demo every second, with the alert rules.
	promPort := freePort(t)
	alerts := filepath.Join(root, "dashboards", "alerts.yml")
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: gotry-demo
    static_configs: [{targets: ["127.0.0.1:%s"]}]
`, alerts, metricsPort)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, dir, "prometheus", nil, promBin, "--config.file="+cfgFile, "--enable-feature=exemplar-storage",
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address=127.0.0.1:"+promPort)
	promURL := "http://127.0.0.1:" + promPort
	waitHTTP(t, promURL+"/-/ready", 60*time.Second)

	t.Run("promtool", func(t *testing.T) {
		run(t, promtool, "check", "rules", alerts)
		run(t, promtool, "test", "rules", filepath.Join(root, "dashboards", "alerts_test.yml"))
	})

	// Every expression to check: each dashboard query, and each vector
	// selector of each alert rule (an alert's full expression is empty until
	// it fires; its series must exist). Let traffic run through an outage, a
	// breaker opening and its recovery until all of them have data.
	queries, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	type check struct{ what, expr string }
	var checks []check
	for _, q := range queries {
		checks = append(checks, check{"dashboard " + q.Row + " / " + q.Panel, dashboards.Substitute(q.Expr)})
	}
	rules := alertExprs(t, alerts)
	for name, expr := range rules {
		for _, sel := range selectors(t, expr) {
			checks = append(checks, check{"alert " + name + " selector", sel})
		}
	}
	var empty []string
	deadline := time.Now().Add(120 * time.Second)
	for {
		empty = empty[:0]
		for _, c := range checks {
			if promCount(t, promURL, c.expr) == 0 {
				empty = append(empty, c.what+": "+c.expr)
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Second)
	}

	t.Run("dashboard queries and alert series return data", func(t *testing.T) {
		if len(empty) > 0 {
			t.Errorf("%d of %d expressions returned no data from the real scrape:\n%s", len(empty), len(checks), strings.Join(empty, "\n"))
		}
		t.Logf("%d expressions checked (%d dashboard queries, %d alert rules)", len(checks), len(queries), len(rules))
	})

	t.Run("alert rules evaluate without error", func(t *testing.T) {
		checkRuleHealth(t, promURL, len(rules))
	})

	t.Run("an exemplar leads from a latency bucket to its trace in Jaeger", func(t *testing.T) {
		// What a user does from the dashboard: click an exemplar on a
		// latency panel, land on the request's waterfall.
		bucket := dashboards.MetricRequestDuration + "_bucket"
		var why string
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			ids, err := exemplarTraceIDs(t, promURL, bucket)
			switch {
			case err != nil:
				why = err.Error()
			case len(ids) == 0:
				why = "Prometheus stored no exemplar with a trace_id for " + bucket
			default:
				for _, id := range ids[max(0, len(ids)-5):] { // the newest few are enough
					var r struct {
						Data []struct {
							TraceID string `json:"traceID"`
						} `json:"data"`
					}
					if err := getJSON(t, jaegerURL+"/api/traces/"+id, &r); err == nil && len(r.Data) == 1 {
						t.Logf("exemplar trace %s found in Jaeger (%d exemplars seen)", id, len(ids))
						return
					} else if err != nil {
						why = fmt.Sprintf("trace %s: %v", id, err)
					}
				}
			}
			time.Sleep(2 * time.Second)
		}
		t.Fatalf("no exemplar led to a trace in Jaeger: %s", why)
	})

	t.Run("jaeger has a retried request trace", func(t *testing.T) {
		var lastErr string
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			ok, why := findRetriedTrace(t, jaegerURL)
			if ok {
				return
			}
			lastErr = why
			time.Sleep(2 * time.Second)
		}
		t.Fatalf("no retried request trace in Jaeger: %s", lastErr)
	})
}

// demoFlags make the demo produce every phenomenon the dashboards chart:
// retries, Retry-After sleeps, hedges and cancelled losers, budget
// refusals, an outage that opens a breaker which later closes.
var demoFlags = []string{
	"-rate", "80", "-concurrency", "32",
	"-outage-start", "3s", "-outage-every", "20s", "-outage-for", "6s",
	"-breaker-failures", "3", "-breaker-open", "2s",
	"-budget-ratio", "0.05", "-budget-reserve", "2",
	"-waterfall-every", "0",
}

// startJaeger starts Jaeger (realstack/jaeger.yaml) on free loopback ports
// and returns its query API URL and its OTLP gRPC and HTTP ports.
func startJaeger(t *testing.T, dir, bin string) (queryURL, otlpGRPC, otlpHTTP string) {
	t.Helper()
	otlpGRPC, otlpHTTP = freePort(t), freePort(t)
	queryPort, queryGRPC := freePort(t), freePort(t)
	start(t, dir, "jaeger", []string{
		"JAEGER_OTLP_GRPC_PORT=" + otlpGRPC, "JAEGER_OTLP_HTTP_PORT=" + otlpHTTP,
		"JAEGER_QUERY_HTTP_PORT=" + queryPort, "JAEGER_QUERY_GRPC_PORT=" + queryGRPC,
	}, bin, "--config="+filepath.Join(root, "realstack", "jaeger.yaml"))
	queryURL = "http://127.0.0.1:" + queryPort
	waitHTTP(t, queryURL+"/api/services", 60*time.Second)
	return queryURL, otlpGRPC, otlpHTTP
}

// buildDemo builds cmd/gotry-demo into dir. The demo is a module of its
// own: built from its directory, it resolves gotry and telemetry to the
// working tree through the repository's go.work or, with GOWORK=off (as
// make runs this module, which is outside the workspace), through its
// replace directives.
func buildDemo(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "gotry-demo")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "cmd", "gotry-demo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	return bin
}

// tool returns the path of a tool: $env if set, else the last line printed
// by the ensure script (which builds or installs it, cached).
func tool(t *testing.T, env, script string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	cmd := exec.Command("bash", filepath.Join(root, script))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func prometheusTools(t *testing.T) (prom, promtool string) {
	if _, err := exec.LookPath("promtool"); err != nil {
		tool(t, "GOTRY_PROMETHEUS", "scripts/ensure-prometheus.sh")
	}
	var err error
	if prom, err = exec.LookPath("prometheus"); err != nil {
		t.Fatalf("prometheus not found after scripts/ensure-prometheus.sh: %v", err)
	}
	if promtool, err = exec.LookPath("promtool"); err != nil {
		t.Fatalf("promtool not found: %v", err)
	}
	return prom, promtool
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// proc is a process started by start.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// stop sends SIGTERM and waits for the process to exit, SIGKILL after 15s.
// It may be called more than once.
func (p *proc) stop() {
	// Signalling fails only if the process has already exited.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// start runs a process for the rest of the test, logging to dir/name.log,
// and stops it (SIGTERM, then SIGKILL) when the test ends.
func start(t *testing.T, dir, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	// The exit status is not checked: the process is stopped on purpose, and
	// what went wrong is in its log, shown below if the test failed.
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		logf.Close()
		if t.Failed() {
			tail(t, name, logf.Name())
		}
	})
	return p
}

// tail logs the end of a process's log.
func tail(t *testing.T, name, path string) {
	data, _ := os.ReadFile(path)
	lines := strings.Split(string(data), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("--- last lines of %s ---\n%s", name, strings.Join(lines, "\n"))
}

func waitHTTP(t *testing.T, u string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(u)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v: %v", u, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
}

func getJSON(t *testing.T, u string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// exemplarTraceIDs returns the trace ids of the exemplars Prometheus stored
// for metric over the last hour, newest last.
func exemplarTraceIDs(t *testing.T, promURL, metric string) ([]string, error) {
	t.Helper()
	var r struct {
		Status string `json:"status"`
		Data   []struct {
			Exemplars []struct {
				Labels map[string]string `json:"labels"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	now := time.Now()
	q := url.Values{"query": {metric}, "start": {fmt.Sprint(now.Add(-time.Hour).Unix())}, "end": {fmt.Sprint(now.Unix())}}
	if err := getJSON(t, promURL+"/api/v1/query_exemplars?"+q.Encode(), &r); err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range r.Data {
		for _, e := range s.Exemplars {
			if id := e.Labels["trace_id"]; id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// promCount runs an instant query and returns how many series (or 1 for a
// scalar) it returned; a query error fails the test.
func promCount(t *testing.T, promURL, expr string) int {
	t.Helper()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(t, promURL+"/api/v1/query?query="+url.QueryEscape(expr), &r); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if r.Data.ResultType == "scalar" {
		return 1
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		t.Fatalf("query %s: decoding %s result: %v", expr, r.Data.ResultType, err)
	}
	return len(series)
}

// alertExprs reads the alert rule file: alert name → expression.
func alertExprs(t *testing.T, path string) map[string]string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	if len(out) == 0 {
		t.Fatal("no alert rules found")
	}
	return out
}

// selectors returns every vector selector of expr, as PromQL text.
func selectors(t *testing.T, expr string) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("parse %s: %v", expr, err)
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.String())
		}
		return nil
	})
	return out
}

// checkRuleHealth asserts Prometheus evaluated every loaded rule without error.
func checkRuleHealth(t *testing.T, promURL string, want int) {
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := getJSON(t, promURL+"/api/v1/rules", &r); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("rule %s: health %q %s", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if n != want {
		t.Errorf("Prometheus loaded %d rules, the file has %d", n, want)
	}
}

type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(k string) (any, bool) {
	for _, tg := range s.Tags {
		if tg.Key == k {
			return tg.Value, true
		}
	}
	return nil, false
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		var f float64
		if _, err := fmt.Sscan(x, &f); err != nil {
			return 0
		}
		return f
	}
	return 0
}

// findRetriedTrace looks for a trace with the request span, two or more
// attempt spans under it (one with http.request.resend_count ≥ 1) and a
// backoff span.
func findRetriedTrace(t *testing.T, jaegerURL string) (bool, string) {
	var r struct {
		Data []struct {
			TraceID string       `json:"traceID"`
			Spans   []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := getJSON(t, jaegerURL+"/api/traces?service=gotry-demo&limit=1000&lookback=1h", &r); err != nil {
		return false, err.Error()
	}
	if len(r.Data) == 0 {
		return false, "no traces for service gotry-demo"
	}
	for _, tr := range r.Data {
		var req *jaegerSpan
		for i, s := range tr.Spans {
			if v, ok := s.tag("gotry.retries"); ok && num(v) >= 1 && strings.HasPrefix(s.OperationName, "gotry ") {
				req = &tr.Spans[i]
			}
		}
		if req == nil {
			continue
		}
		attempts, resent, backoff := 0, false, false
		for _, s := range tr.Spans {
			if s.parent() != req.SpanID {
				continue
			}
			// Every attempt span has an outcome; only resends have a kind.
			if _, ok := s.tag("gotry.attempt.outcome"); ok {
				attempts++
				if v, ok := s.tag("http.request.resend_count"); ok && num(v) >= 1 {
					resent = true
				}
			}
			if s.OperationName == "gotry backoff" {
				backoff = true
			}
		}
		if attempts >= 2 && resent && backoff {
			t.Logf("trace %s: %d attempts under %q, with a resend count and a backoff span", tr.TraceID, attempts, req.OperationName)
			return true, ""
		}
	}
	return false, fmt.Sprintf("%d traces, none with a request span, 2+ attempts with a resend count and a backoff span", len(r.Data))
}
