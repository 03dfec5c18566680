package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

// Ports the images listen on by default, when the compose file does not
// move them: Jaeger v2 all-in-one's OTLP gRPC receiver (tools/README.md),
// Prometheus's web port and Grafana's.
const (
	jaegerOTLPGRPCPort = 4317
	jaegerQueryPort    = 16686
	prometheusPort     = 9090
	grafanaPort        = 3000
)

// Service names in docker-compose.yml.
const (
	svcDemo       = "gotry-demo"
	svcCollector  = "otel-collector"
	svcJaeger     = "jaeger"
	svcPrometheus = "prometheus"
	svcGrafana    = "grafana"
)

// stack is every file of the demo stack, loaded.
type stack struct {
	root        string
	project     *types.Project
	collector   Collector
	prometheus  Prometheus
	datasources Datasources
	dashboards  DashboardProviders
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ComposeFile)); err != nil {
		t.Fatalf("repository root not found from the test directory: %v", err)
	}
	return root
}

func load(t *testing.T) *stack {
	t.Helper()
	s := &stack{root: repoRoot(t)}
	p, err := LoadCompose(context.Background(), filepath.Join(s.root, ComposeFile), s.root)
	if err != nil {
		t.Fatalf("compose-go: %v", err)
	}
	s.project = p
	for _, f := range []struct {
		path   string
		v      any
		strict bool
	}{
		{CollectorFile, &s.collector, true},
		{PrometheusFile, &s.prometheus, true},
		{DatasourcesFile, &s.datasources, true},
		{DashboardsFile, &s.dashboards, true},
	} {
		if err := ReadYAML(filepath.Join(s.root, f.path), f.v, f.strict); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *stack) service(t *testing.T, name string) types.ServiceConfig {
	t.Helper()
	svc, ok := s.project.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %q", name)
	}
	return svc
}

// mountedFile returns the repository file svc mounts at target.
func (s *stack) mountedFile(t *testing.T, svc, target string) string {
	t.Helper()
	src, ok := MountSource(s.service(t, svc), target)
	if !ok {
		t.Fatalf("service %s mounts nothing at %s", svc, target)
	}
	return src
}

func TestComposeServices(t *testing.T) {
	s := load(t)
	var names []string
	for n := range s.project.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{svcDemo, svcGrafana, svcJaeger, svcCollector, svcPrometheus}
	if !slices.Equal(names, want) {
		t.Fatalf("services %q, want %q", names, want)
	}
}

// compose-go's validation is on: a typo'd key or a dependency on a service
// that does not exist fails the load. Without this, the other tests could
// pass on a file docker compose rejects.
func TestComposeValidationRejects(t *testing.T) {
	root := repoRoot(t)
	orig, err := os.ReadFile(filepath.Join(root, ComposeFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new string
	}{
		{"unknown key", "    restart: unless-stopped\n", "    restart: unless-stopped\n    retsart: always\n"},
		{"depends_on an unknown service", "      - jaeger\n", "      - jeager\n"},
		{"port not a number", `"127.0.0.1:9090:9090"`, `"127.0.0.1:9090:ninety"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(string(orig), tt.old) {
				t.Fatalf("docker-compose.yml no longer contains %q; update the test", tt.old)
			}
			bad := filepath.Join(t.TempDir(), "docker-compose.yml")
			if err := os.WriteFile(bad, []byte(strings.Replace(string(orig), tt.old, tt.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadCompose(context.Background(), bad, root); err == nil {
				t.Fatalf("compose-go accepted a file with %s", tt.name)
			}
		})
	}
}

// Every bind-mounted path and the demo's build inputs exist in the
// repository.
func TestComposeReferencedFilesExist(t *testing.T) {
	s := load(t)
	for name, svc := range s.project.Services {
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			t.Run(name+" "+v.Target, func(t *testing.T) {
				if !strings.HasPrefix(v.Source, s.root) {
					t.Errorf("bind source %s is outside the repository", v.Source)
				}
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("bind source: %v", err)
				}
				if !v.ReadOnly {
					t.Errorf("bind mount of %s is writable; mount configuration read-only", v.Source)
				}
			})
		}
		if b := svc.Build; b != nil {
			t.Run(name+" build", func(t *testing.T) {
				if _, err := os.Stat(filepath.Join(b.Context, b.Dockerfile)); err != nil {
					t.Errorf("Dockerfile: %v", err)
				}
				if _, err := os.Stat(filepath.Join(b.Context, "go.mod")); err != nil {
					t.Errorf("build context is not the module root: %v", err)
				}
			})
		}
	}
}

// Nothing is published beyond loopback, and every image is pinned.
func TestComposePortsAndImages(t *testing.T) {
	s := load(t)
	for name, svc := range s.project.Services {
		t.Run(name, func(t *testing.T) {
			for _, p := range svc.Ports {
				if p.HostIP != "127.0.0.1" {
					t.Errorf("port %d published on %q, want 127.0.0.1", p.Target, p.HostIP)
				}
			}
			if svc.Build == nil {
				_, tag, ok := strings.Cut(svc.Image[strings.LastIndex(svc.Image, "/")+1:], ":")
				if !ok || tag == "" || tag == "latest" {
					t.Errorf("image %q is not pinned to a version", svc.Image)
				}
			}
		})
	}
}

// The collector's pipelines use only components it defines, every defined
// component is used, and memory_limiter runs first.
func TestCollectorPipelines(t *testing.T) {
	checkPipelines(t, load(t).collector)
}

func checkPipelines(t *testing.T, c Collector) {
	t.Helper()
	if len(c.Service.Pipelines) == 0 {
		t.Fatal("no pipelines")
	}
	used := map[string]bool{}
	for name, p := range c.Service.Pipelines {
		t.Run(name, func(t *testing.T) {
			for _, ref := range []struct {
				kind string
				ids  []string
				defs map[string]any
			}{{"receiver", p.Receivers, c.Receivers}, {"processor", p.Processors, c.Processors}, {"exporter", p.Exporters, c.Exporters}} {
				if ref.kind != "processor" && len(ref.ids) == 0 {
					t.Errorf("pipeline has no %ss", ref.kind)
				}
				for _, id := range ref.ids {
					used[ref.kind+" "+id] = true
					if _, ok := ref.defs[id]; !ok {
						t.Errorf("pipeline uses %s %q, which is not defined", ref.kind, id)
					}
				}
			}
			if len(p.Processors) == 0 || p.Processors[0] != "memory_limiter" {
				t.Errorf("processors %q: memory_limiter must come first", p.Processors)
			}
			if !slices.Contains(p.Processors, "batch") {
				t.Errorf("processors %q: no batch", p.Processors)
			}
		})
	}
	for _, def := range []struct {
		kind string
		defs map[string]any
	}{{"receiver", c.Receivers}, {"processor", c.Processors}, {"exporter", c.Exporters}} {
		for id := range def.defs {
			if !used[def.kind+" "+id] {
				t.Errorf("%s %q is defined but in no pipeline", def.kind, id)
			}
		}
	}
	for _, id := range c.Service.Extensions {
		if _, ok := c.Extensions[id]; !ok {
			t.Errorf("service uses extension %q, which is not defined", id)
		}
	}
	for _, p := range []string{"traces", "metrics"} {
		if _, ok := c.Service.Pipelines[p]; !ok {
			t.Errorf("no %s pipeline", p)
		}
	}
}

// The compose file starts the collector with the mounted file, and the demo
// sends OTLP/HTTP to the collector's HTTP receiver.
func TestDemoToCollector(t *testing.T) {
	s := load(t)
	col := s.service(t, svcCollector)
	cfgPath, ok := FlagValue(col.Command, "config")
	if !ok {
		t.Fatalf("collector command %q has no --config", col.Command)
	}
	if src := s.mountedFile(t, svcCollector, cfgPath); src != filepath.Join(s.root, CollectorFile) {
		t.Errorf("collector reads %s from %s, want %s", cfgPath, src, CollectorFile)
	}

	demo := s.service(t, svcDemo)
	ep := demo.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
	if ep == nil {
		t.Fatal("demo has no OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	host, port, err := URLHostPort(*ep)
	if err != nil {
		t.Fatal(err)
	}
	if host != svcCollector {
		t.Errorf("demo exports to host %q, want the collector service %q", host, svcCollector)
	}
	_, httpPort, err := HostPort(LookupString(s.collector.Receivers["otlp"], "protocols", "http", "endpoint"))
	if err != nil {
		t.Fatalf("collector OTLP HTTP receiver endpoint: %v", err)
	}
	if port != httpPort {
		t.Errorf("demo exports OTLP/HTTP to port %d, collector's OTLP HTTP receiver listens on %d", port, httpPort)
	}
	if !strings.HasPrefix(*ep, "http://") {
		t.Errorf("endpoint %q: the collector's receiver has no TLS, want http://", *ep)
	}
	if !slices.Contains(demo.GetDependencies(), svcCollector) {
		t.Errorf("demo does not depend on the collector")
	}
	// Published collector ports match its receivers.
	for _, proto := range []string{"grpc", "http"} {
		_, p, err := HostPort(LookupString(s.collector.Receivers["otlp"], "protocols", proto, "endpoint"))
		if err != nil {
			t.Fatalf("collector OTLP %s endpoint: %v", proto, err)
		}
		if _, ok := Published(col, p); !ok {
			t.Errorf("collector OTLP %s port %d is not published", proto, p)
		}
	}
}

// The collector exports traces to Jaeger's OTLP gRPC receiver.
func TestCollectorToJaeger(t *testing.T) {
	s := load(t)
	var found bool
	for id, cfg := range s.collector.Exporters {
		if id != "otlp" && !strings.HasPrefix(id, "otlp/") {
			continue
		}
		found = true
		host, port, err := HostPort(LookupString(cfg, "endpoint"))
		if err != nil {
			t.Fatalf("exporter %s endpoint: %v", id, err)
		}
		if host != svcJaeger {
			t.Errorf("exporter %s sends to %q, want the %s service", id, host, svcJaeger)
		}
		want := jaegerOTLPGRPCPort
		if v, ok := FlagValue(s.service(t, svcJaeger).Command, "set=receivers.otlp.protocols.grpc.endpoint"); ok {
			_, want, _ = HostPort(v)
		}
		if port != want {
			t.Errorf("exporter %s sends to port %d, Jaeger's OTLP gRPC receiver listens on %d", id, port, want)
		}
		if insecure, _ := Lookup(cfg, "tls", "insecure"); insecure != true {
			t.Errorf("exporter %s: Jaeger's receiver has no TLS, want tls.insecure: true", id)
		}
		if !slices.Contains(s.collector.Service.Pipelines["traces"].Exporters, id) {
			t.Errorf("exporter %s is not in the traces pipeline", id)
		}
	}
	if !found {
		t.Fatal("no otlp exporter for Jaeger")
	}
	if !slices.Contains(s.service(t, svcCollector).GetDependencies(), svcJaeger) {
		t.Errorf("collector does not depend on jaeger")
	}
}

// Prometheus loads the mounted config and alert rules and scrapes exactly
// the collector's Prometheus exporter and the demo's /metrics.
func TestPrometheusScrapes(t *testing.T) {
	s := load(t)
	prom := s.service(t, svcPrometheus)
	cfgPath, ok := FlagValue(prom.Command, "config.file")
	if !ok {
		t.Fatalf("prometheus command %q has no --config.file", prom.Command)
	}
	if src := s.mountedFile(t, svcPrometheus, cfgPath); src != filepath.Join(s.root, PrometheusFile) {
		t.Errorf("prometheus reads %s from %s, want %s", cfgPath, src, PrometheusFile)
	}
	if len(s.prometheus.RuleFiles) == 0 {
		t.Fatal("prometheus.yml loads no rule files")
	}
	for _, rf := range s.prometheus.RuleFiles {
		if src := s.mountedFile(t, svcPrometheus, rf); src != filepath.Join(s.root, "dashboards", "alerts.yml") {
			t.Errorf("rule file %s comes from %s, want dashboards/alerts.yml", rf, src)
		}
	}

	_, exporterPort, err := HostPort(LookupString(s.collector.Exporters["prometheus"], "endpoint"))
	if err != nil {
		t.Fatalf("collector prometheus exporter endpoint: %v", err)
	}
	addr, ok := FlagValue(s.service(t, svcDemo).Command, "metrics-addr")
	if !ok {
		t.Fatal("demo command has no -metrics-addr")
	}
	_, demoPort, err := HostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{svcCollector: exporterPort, svcDemo: demoPort}
	got := map[string]int{}
	for _, sc := range s.prometheus.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s; both exporters serve /metrics", sc.JobName, sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				h, p, err := HostPort(target)
				if err != nil {
					t.Errorf("job %s target: %v", sc.JobName, err)
					continue
				}
				got[h] = p
				if h == svcCollector && !sc.HonorLabels {
					t.Errorf("job %s: without honor_labels the exporter's job label (service.name) becomes exported_job", sc.JobName)
				}
			}
		}
	}
	for h, p := range want {
		if got[h] != p {
			t.Errorf("prometheus scrapes %s on port %d, want %d", h, got[h], p)
		}
		if _, ok := s.project.Services[h]; !ok {
			t.Errorf("scrape target %s is not a service", h)
		}
	}
	if len(got) != len(want) {
		t.Errorf("scrape targets %v, want %v", got, want)
	}
	if _, ok := Published(s.service(t, svcDemo), demoPort); !ok {
		t.Errorf("demo metrics port %d is not published", demoPort)
	}
}

// Grafana's data sources point at the Prometheus and Jaeger services'
// ports, and the dashboard provider at the mounted dashboards directory.
func TestGrafanaProvisioning(t *testing.T) {
	s := load(t)
	graf := s.service(t, svcGrafana)
	if src := s.mountedFile(t, svcGrafana, "/etc/grafana/provisioning"); src != filepath.Join(s.root, "examples", "otel-collector", "grafana", "provisioning") {
		t.Errorf("provisioning mounted from %s", src)
	}
	if _, ok := Published(graf, grafanaPort); !ok {
		t.Errorf("grafana port %d not published", grafanaPort)
	}

	want := map[string]struct {
		svc  string
		port int
	}{"prometheus": {svcPrometheus, prometheusPort}, "jaeger": {svcJaeger, jaegerQueryPort}}
	defaults := 0
	uids := map[string]string{}
	for _, ds := range s.datasources.Datasources {
		t.Run(ds.Name, func(t *testing.T) {
			w, ok := want[ds.Type]
			if !ok {
				t.Fatalf("unexpected data source type %q", ds.Type)
			}
			delete(want, ds.Type)
			host, port, err := URLHostPort(ds.URL)
			if err != nil {
				t.Fatal(err)
			}
			if host != w.svc || port != w.port {
				t.Errorf("URL %s, want http://%s:%d", ds.URL, w.svc, w.port)
			}
			if _, ok := Published(s.service(t, w.svc), w.port); !ok {
				t.Errorf("service %s does not publish port %d", w.svc, w.port)
			}
			if ds.UID == "" {
				t.Errorf("no fixed uid")
			}
			if !slices.Contains(graf.GetDependencies(), w.svc) {
				t.Errorf("grafana does not depend on %s", w.svc)
			}
		})
		uids[ds.UID] = ds.Type
		if ds.IsDefault {
			defaults++
			if ds.Type != "prometheus" {
				t.Errorf("default data source is %s; the dashboard's $datasource variable needs a Prometheus default", ds.Type)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("missing data sources: %v", want)
	}
	if defaults != 1 {
		t.Errorf("%d default data sources, want 1", defaults)
	}

	if len(s.dashboards.Providers) != 1 {
		t.Fatalf("%d dashboard providers, want 1", len(s.dashboards.Providers))
	}
	dir := s.mountedFile(t, svcGrafana, s.dashboards.Providers[0].Options.Path)
	if dir != filepath.Join(s.root, "dashboards", "grafana") {
		t.Errorf("dashboards mounted from %s, want dashboards/grafana", dir)
	}
	checkDashboardDatasources(t, dir, uids)
	if home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != nil {
		rel, err := filepath.Rel(s.dashboards.Providers[0].Options.Path, *home)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("home dashboard %s is outside the provisioned directory", *home)
		} else if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			t.Errorf("home dashboard: %v", err)
		}
	}
}

// checkDashboardDatasources reads every dashboard in dir: each data source
// it names by a fixed uid must be provisioned, and one named through a
// variable needs a provisioned data source of that type.
func checkDashboardDatasources(t *testing.T, dir string, uids map[string]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dir, err)
	}
	types := map[string]bool{}
	for _, typ := range uids {
		types[typ] = true
	}
	variable := regexp.MustCompile(`^\$\{?[A-Za-z_]+\}?$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				if ds, ok := x["datasource"].(map[string]any); ok {
					uid, _ := ds["uid"].(string)
					typ, _ := ds["type"].(string)
					switch {
					case uid == "" || variable.MatchString(uid):
						if typ != "" && !types[typ] {
							t.Errorf("%s: a %s data source is used but none is provisioned", filepath.Base(f), typ)
						}
					case uids[uid] == "":
						t.Errorf("%s: data source uid %q is not provisioned", filepath.Base(f), uid)
					}
				}
				if x["type"] == "datasource" {
					if q, _ := x["query"].(string); q != "" && !types[q] {
						t.Errorf("%s: variable %v selects %s data sources; none is provisioned", filepath.Base(f), x["name"], q)
					}
				}
				for _, c := range x {
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			}
		}
		walk(d)
	}
}

// With the natively built Jaeger (an OpenTelemetry Collector distribution
// with the same components, scripts/ensure-jaeger.sh), the collector
// configuration passes the collector's own validation.
func TestCollectorConfigValidates(t *testing.T) {
	jaeger := findJaeger()
	if jaeger == "" {
		t.Skip("no jaeger binary (scripts/ensure-jaeger.sh builds it; or set JAEGER_BIN)")
	}
	root := repoRoot(t)
	for _, f := range []string{CollectorFile, NativeJaegerFile} {
		t.Run(f, func(t *testing.T) {
			out, err := exec.Command(jaeger, "validate", "--config="+filepath.Join(root, f)).CombinedOutput()
			if err != nil {
				t.Fatalf("jaeger validate: %v\n%s", err, out)
			}
		})
	}
	// And it does catch a broken file.
	orig, err := os.ReadFile(filepath.Join(root, CollectorFile))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(orig), "insecure: true", "insecure: sometimes", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(jaeger, "validate", "--config="+bad).CombinedOutput(); err == nil {
		t.Fatalf("jaeger validate accepted a broken config:\n%s", out)
	}
}

func findJaeger() string { return findTool("JAEGER_BIN", "jaeger") }

// findTool returns $env if set, else name in the tools cache
// (scripts/ensure-*.sh), else name on PATH, else "".
func findTool(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	dir := os.Getenv("GOTRY_TOOLS_BIN")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "gotry-tools", "bin")
	}
	if p := filepath.Join(dir, name); isExec(p) {
		return p
	}
	p, _ := exec.LookPath(name)
	return p
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&0o111 != 0
}

// promtool accepts prometheus.yml once its rule file path (a path inside the
// container) points at the repository's alerts.yml.
func TestPrometheusConfigPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (scripts/ensure-prometheus.sh installs it)")
	}
	s := load(t)
	b, err := os.ReadFile(filepath.Join(s.root, PrometheusFile))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, rf := range s.prometheus.RuleFiles {
		text = strings.ReplaceAll(text, rf, filepath.Join(s.root, "dashboards", "alerts.yml"))
	}
	f := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// The native stack (native/run.sh): Jaeger plays the collector on loopback,
// the demo exports to its OTLP HTTP receiver, and Prometheus scrapes its
// Prometheus exporter and the demo's /metrics.
func TestNativeStack(t *testing.T) {
	root := repoRoot(t)
	var j Collector
	if err := ReadYAML(filepath.Join(root, NativeJaegerFile), &j, true); err != nil {
		t.Fatal(err)
	}
	checkPipelines(t, j)
	var prom Prometheus
	if err := ReadYAML(filepath.Join(root, NativePrometheusFile), &prom, true); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, NativeRunScript))
	if err != nil {
		t.Fatal(err)
	}
	run := string(script)

	endpoint := func(defs map[string]any, keys ...string) int {
		t.Helper()
		h, p, err := HostPort(EnvDefaults(LookupString(defs, keys...)))
		if err != nil {
			t.Fatalf("%v: %v", keys, err)
		}
		if h != "127.0.0.1" {
			t.Errorf("%v listens on %q, want 127.0.0.1", keys, h)
		}
		return p
	}
	httpPort := endpoint(j.Receivers, "otlp", "protocols", "http", "endpoint")
	endpoint(j.Receivers, "otlp", "protocols", "grpc", "endpoint")
	exporterPort := endpoint(j.Exporters, "prometheus", "endpoint")

	m := regexp.MustCompile(`OTEL_EXPORTER_OTLP_ENDPOINT=(\S+)`).FindStringSubmatch(run)
	if m == nil {
		t.Fatal("run.sh sets no OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if h, p, err := URLHostPort(m[1]); err != nil || h != "127.0.0.1" || p != httpPort {
		t.Errorf("run.sh exports to %s, Jaeger's OTLP HTTP receiver is 127.0.0.1:%d", m[1], httpPort)
	}
	// The Prometheus link it prints comes from prometheus_alerts_url, which
	// realstack runs against Prometheus 2.42 and 3 (Debian's 2.42 has no
	// /alerts, only /classic/alerts).
	if !strings.Contains(run, "scripts/lib/prometheus-url.sh") || !strings.Contains(run, "prometheus_alerts_url http://127.0.0.1:9090") {
		t.Error("run.sh does not print its Prometheus link with prometheus_alerts_url (scripts/lib/prometheus-url.sh)")
	}
	if regexp.MustCompile(`9090/alerts`).MatchString(run) {
		t.Error("run.sh prints /alerts, a 404 on Debian's Prometheus 2.42")
	}
	m = regexp.MustCompile(`-metrics-addr (\S+)`).FindStringSubmatch(run)
	if m == nil {
		t.Fatal("run.sh passes no -metrics-addr")
	}
	_, demoPort, err := HostPort(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	slices.Sort(targets)
	want := []string{fmt.Sprintf("127.0.0.1:%d", exporterPort), fmt.Sprintf("127.0.0.1:%d", demoPort)}
	slices.Sort(want)
	if !slices.Equal(targets, want) {
		t.Errorf("native Prometheus scrapes %q, want %q", targets, want)
	}
	for _, rf := range prom.RuleFiles {
		if _, err := os.Stat(filepath.Join(root, filepath.Dir(NativePrometheusFile), rf)); err != nil {
			t.Errorf("rule file %s: %v", rf, err)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "config", filepath.Join(root, NativePrometheusFile)).CombinedOutput(); err != nil {
			t.Errorf("promtool check config: %v\n%s", err, out)
		}
	}
}

// The collector's Prometheus exporter forgets a series metric_expiration
// after its last update. Its default, 5m, kept a stopped app's last values
// (an open breaker included) on the exporter, and so in Prometheus, for
// five minutes: ghost alerts. Both configs that play the collector set it
// to several of the apps' export intervals (a late or lost export never
// drops a live series) and at most a minute (a stopped app's series are gone
// within one). realstack/collector_test.go measures it on the real stack.
func TestMetricExpiration(t *testing.T) {
	s := load(t)
	env := s.service(t, svcDemo).Environment["OTEL_METRIC_EXPORT_INTERVAL"]
	if env == nil {
		t.Fatal("the demo sets no OTEL_METRIC_EXPORT_INTERVAL (the SDK default is 60s)")
	}
	composeMS, err := strconv.Atoi(*env)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(s.root, NativeRunScript))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`OTEL_METRIC_EXPORT_INTERVAL:-(\d+)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("run.sh sets no default OTEL_METRIC_EXPORT_INTERVAL")
	}
	nativeMS, _ := strconv.Atoi(string(m[1]))

	var native Collector
	if err := ReadYAML(filepath.Join(s.root, NativeJaegerFile), &native, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file     string
		cfg      Collector
		interval time.Duration
	}{
		{CollectorFile, s.collector, time.Duration(composeMS) * time.Millisecond},
		{NativeJaegerFile, native, time.Duration(nativeMS) * time.Millisecond},
	} {
		t.Run(c.file, func(t *testing.T) {
			v := LookupString(c.cfg.Exporters["prometheus"], "metric_expiration")
			if v == "" {
				t.Fatal("the prometheus exporter sets no metric_expiration (default 5m: ghost alerts)")
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			if d < 3*c.interval {
				t.Errorf("metric_expiration %v is less than 3 export intervals of %v: live series would drop out", d, c.interval)
			}
			if d > time.Minute {
				t.Errorf("metric_expiration %v keeps a stopped app's series for more than a minute", d)
			}
		})
	}
}

// The collector built natively with ocb from tools/otelcol
// (scripts/ensure-otelcol.sh) has exactly the components the shipped config
// uses, at the pinned image's release: it accepts the config, and rejects a
// broken one.
func TestCollectorConfigValidatesWithOcbBuild(t *testing.T) {
	bin := findTool("OTELCOL_BIN", "otelcol-gotry")
	if bin == "" {
		t.Skip("no otelcol-gotry binary (scripts/ensure-otelcol.sh builds it; or set OTELCOL_BIN)")
	}
	root := repoRoot(t)
	if out, err := exec.Command(bin, "validate", "--config="+filepath.Join(root, CollectorFile)).CombinedOutput(); err != nil {
		t.Fatalf("otelcol-gotry validate: %v\n%s", err, out)
	}
	orig, err := os.ReadFile(filepath.Join(root, CollectorFile))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(orig), "metric_expiration: 30s", "metric_expiration: soon", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "validate", "--config="+bad).CombinedOutput(); err == nil {
		t.Fatalf("otelcol-gotry validate accepted metric_expiration: soon:\n%s", out)
	}
}
