package dashboards

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

const (
	alertsFile     = "alerts.yml"
	alertsTestFile = "alerts_test.yml"
)

// alertNames are the alerts alerts.yml must define, in order.
func alertNames() []string {
	return []string{
		"GotryBreakerOpened",
		"GotryBreakerOpen",
		"GotryBreakerFlapping",
		"GotryRetryStorm",
		"GotryRetryBudgetExhausted",
		"GotryHedgeBudgetExhausted",
		"GotryHighGiveUpRatio",
		"GotryLoadShedding",
		"GotryFleetRetryAmplification",
	}
}

// alertLabels are the labels an alert keeps: each one is per job and host,
// but a fleet alert, which adds up every job calling a host, is per host.
func alertLabels(alert string) []string {
	if strings.HasPrefix(alert, "GotryFleet") {
		return []string{LabelServer}
	}
	return []string{LabelJob, LabelServer}
}

func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", alertsFile, errs)
	}
	if len(groups.Groups) != 1 || groups.Groups[0].Name != "gotry" {
		t.Fatalf("%s: want one group named gotry, got %d groups", alertsFile, len(groups.Groups))
	}
	return groups.Groups[0].Rules
}

// templateLabel matches {{ $labels.name }} in an annotation.
var templateLabel = regexp.MustCompile(`\$labels\.(\w+)`)

func TestAlertRules(t *testing.T) {
	rules := loadRules(t)
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
	}
	if !slices.Equal(names, alertNames()) {
		t.Fatalf("%s defines %v, want %v", alertsFile, names, alertNames())
	}
	for _, r := range rules {
		t.Run(r.Alert, func(t *testing.T) {
			for _, p := range lintContract(r.Expr) {
				t.Errorf("expr: %s", p)
			}
			e, err := parser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err) // reported above too
			}
			// Every aggregation keeps exactly job and server_address, so
			// the alert has those labels and the annotations can use them.
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if a, ok := n.(*parser.AggregateExpr); ok && (a.Without || !slices.Equal(a.Grouping, alertLabels(r.Alert))) {
					t.Errorf("%s aggregates by %v, want by (%s)", a.Op, a.Grouping, strings.Join(alertLabels(r.Alert), ", "))
				}
				return nil
			})
			if s := r.Labels["severity"]; s != "info" && s != "warning" && s != "critical" {
				t.Errorf("severity %q, want info, warning or critical", s)
			}
			for _, a := range []string{"summary", "description"} {
				text := r.Annotations[a]
				if !strings.Contains(text, "{{ $labels."+LabelServer+" }}") {
					t.Errorf("annotation %s does not name the host: %q", a, text)
				}
				for _, m := range templateLabel.FindAllStringSubmatch(text, -1) {
					if !slices.Contains(alertLabels(r.Alert), m[1]) {
						t.Errorf("annotation %s uses $labels.%s, which the alert does not keep", a, m[1])
					}
				}
			}
		})
	}
}

// ruleTestFile is the part of a promtool rule test file these tests read.
type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTests []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func TestAlertUnitTestsCoverEveryAlert(t *testing.T) {
	data, err := os.ReadFile(alertsTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTestFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", alertsTestFile, err)
	}
	if !slices.Equal(f.RuleFiles, []string{alertsFile}) {
		t.Errorf("rule_files %v, want [%s]", f.RuleFiles, alertsFile)
	}
	severity := map[string]string{}
	for _, r := range loadRules(t) {
		severity[r.Alert] = r.Labels["severity"]
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, g := range f.Tests {
		// One interval everywhere, so a range means the same number of
		// samples on Prometheus 2 and 3.
		if g.Interval != "30s" {
			t.Errorf("test %q: interval %q, want 30s", g.Name, g.Interval)
		}
		if len(g.InputSeries) == 0 {
			t.Errorf("test %q has no input series", g.Name)
		}
		for _, s := range g.InputSeries {
			lintInputSeries(t, g.Name, s.Series)
		}
		for _, at := range g.AlertRuleTests {
			if _, ok := severity[at.Alertname]; !ok {
				t.Errorf("test %q checks unknown alert %q", g.Name, at.Alertname)
			}
			if len(at.ExpAlerts) == 0 {
				quiet[at.Alertname] = true
			}
			for _, a := range at.ExpAlerts {
				fires[at.Alertname] = true
				if got := a.ExpLabels["severity"]; got != severity[at.Alertname] {
					t.Errorf("test %q expects %s with severity %q, the rule has %q", g.Name, at.Alertname, got, severity[at.Alertname])
				}
			}
		}
	}
	for _, name := range alertNames() {
		if !fires[name] {
			t.Errorf("no test in %s has %s firing", alertsTestFile, name)
		}
		if !quiet[name] {
			t.Errorf("no test in %s has %s staying quiet", alertsTestFile, name)
		}
	}
}

// lintInputSeries checks that a test's input series looks like what the
// telemetry exports: a contract metric with contract labels and values, the
// scope label, and the target labels.
func lintInputSeries(t *testing.T, test, series string) {
	t.Helper()
	ms, err := parser.ParseMetricSelector(series)
	if err != nil {
		t.Errorf("test %q: series %q: %v", test, series, err)
		return
	}
	vs := &parser.VectorSelector{LabelMatchers: ms}
	have := map[string]bool{}
	for _, m := range ms {
		if m.Name == model.MetricNameLabel {
			vs.Name = m.Value
		}
		have[m.Name] = true
	}
	for _, p := range lintSelector(vs) {
		t.Errorf("test %q: series %q: %s", test, series, p)
	}
	for _, l := range []string{LabelJob, LabelInstance, LabelScope} {
		if !have[l] {
			t.Errorf("test %q: series %q lacks the %s label every exported series has", test, series, l)
		}
	}
}

// TestPromtool runs promtool's own checks: the rules load, and the unit tests
// in alerts_test.yml pass.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH, so alerts.yml is not checked: install it with scripts/ensure-prometheus.sh or `apt-get install prometheus` (CI installs it)")
	}
	for _, args := range [][]string{
		{"check", "rules", alertsFile},
		{"test", "rules", alertsTestFile},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
