package dashboards

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file holds the PromQL checks the dashboard and alert tests share.

// keepVariables substitutes Grafana's built-in variables but leaves user
// variables as "$name", so an expression parses and its matchers still show
// which variable they use.
func keepVariables(expr string) string {
	return substitute(expr, func(name string) string { return "$" + name })
}

// selectors returns the vector selectors under node.
func selectors(node parser.Node) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// metricNames returns the series names expr selects; it fails t if expr
// does not parse.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("parsing %q: %v", expr, err)
	}
	var names []string
	for _, vs := range selectors(e) {
		names = append(names, vs.Name)
	}
	return names
}

// literalAlternation matches regexp matcher values that are plain
// alternations of label values, like "success|not_retryable".
var literalAlternation = regexp.MustCompile(`^[\w.-]+(\|[\w.-]+)*$`)

// lintContract parses expr and returns every way it strays from the metric
// contract: a metric outside it, a matcher on a label the metric does not
// carry, a value outside a label's closed set, a matcher on a bucket bound
// (le), or a grouping label that no metric below the aggregation carries.
func lintContract(expr string) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			problems = append(problems, lintSelector(n)...)
			problems = append(problems, lintBucketBound(n)...)
		case *parser.AggregateExpr:
			problems = append(problems, lintGrouping(n)...)
		}
		return nil
	})
	return problems
}

func lintSelector(vs *parser.VectorSelector) []string {
	if _, ok := LookupSeries(vs.Name); !ok {
		return []string{fmt.Sprintf("metric %q is not in the contract", vs.Name)}
	}
	var problems []string
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		if !seriesHasLabel(vs.Name, m.Name) {
			problems = append(problems, fmt.Sprintf("%s has no label %q", vs.Name, m.Name))
			continue
		}
		allowed := LabelValues(m.Name)
		if allowed == nil {
			continue
		}
		var values []string
		switch {
		case m.Type == labels.MatchEqual || m.Type == labels.MatchNotEqual:
			values = []string{m.Value}
		case literalAlternation.MatchString(m.Value):
			values = strings.Split(m.Value, "|")
		}
		for _, v := range values {
			if !slices.Contains(allowed, v) {
				problems = append(problems, fmt.Sprintf("%s: %q is not a value of %s (want one of %v)", vs.Name, v, m.Name, allowed))
			}
		}
	}
	return problems
}

// lintBucketBound reports a matcher on a bucket bound. Prometheus 2 keeps
// le as the exporter wrote it (le="1"), Prometheus 3 normalizes it
// (le="1.0"), so a query matching on le would select different series on
// each. Grouping by le, as histogram_quantile needs, is fine.
func lintBucketBound(vs *parser.VectorSelector) []string {
	for _, m := range vs.LabelMatchers {
		// (A matcher on le of a non-bucket series is lintSelector's.)
		if m.Name == LabelBucket && seriesHasLabel(vs.Name, LabelBucket) {
			return []string{fmt.Sprintf("%s matches on %s, whose spelling differs between Prometheus 2 and 3", vs.Name, LabelBucket)}
		}
	}
	return nil
}

func lintGrouping(a *parser.AggregateExpr) []string {
	if a.Without {
		return nil
	}
	below := selectors(a.Expr)
	var problems []string
	for _, g := range a.Grouping {
		carried := slices.ContainsFunc(below, func(vs *parser.VectorSelector) bool {
			return seriesHasLabel(vs.Name, g)
		})
		if !carried {
			problems = append(problems, fmt.Sprintf("%s by (%s): no metric below carries %q", a.Op, g, g))
		}
	}
	return problems
}

// rangeSelector matches the range of a range selector in a dashboard
// expression (gotry's expressions have no other square brackets).
var rangeSelector = regexp.MustCompile(`\[([^\]]*)\]`)

// ratioPeer is a vector selector and the series it must be filtered alike
// with: every series under the outermost division that holds it, itself
// included (itself alone outside any division).
type ratioPeer struct {
	vs    *parser.VectorSelector
	peers []string
}

// ratioPeers returns the vector selectors of e, in order, each with its
// peers.
func ratioPeers(e parser.Expr) []ratioPeer {
	var out []ratioPeer
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		var outer parser.Node = vs
		for _, p := range path { // root first
			if b, ok := p.(*parser.BinaryExpr); ok && b.Op == parser.DIV {
				outer = b
				break
			}
		}
		rp := ratioPeer{vs: vs}
		for _, s := range selectors(outer) {
			rp.peers = append(rp.peers, s.Name)
		}
		out = append(out, rp)
		return nil
	})
	return out
}

// lintFilters returns the ways a dashboard expression fails the dashboard
// conventions: every selector filters on each template variable whose label
// its metric carries, as label=~"$variable", except in a ratio, whose
// series are all filtered alike, on the variables whose labels every one of
// them carries (a side filtered on a label the other lacks divides all of
// one by the selected part of the other); and every range is
// $__rate_interval.
func lintFilters(expr string) []string {
	var problems []string
	for _, m := range rangeSelector.FindAllStringSubmatch(expr, -1) {
		if m[1] != "$__rate_interval" {
			problems = append(problems, fmt.Sprintf("range [%s] should be [$__rate_interval]", m[1]))
		}
	}
	e, err := parser.ParseExpr(keepVariables(expr))
	if err != nil {
		return append(problems, fmt.Sprintf("does not parse: %v", err))
	}
	for _, rp := range ratioPeers(e) {
		vs := rp.vs
		for _, f := range filters() {
			if !seriesHasLabel(vs.Name, f.label) {
				continue
			}
			want := &labels.Matcher{Type: labels.MatchRegexp, Name: f.label, Value: "$" + f.variable}
			found := slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Type == want.Type && m.Name == want.Name && m.Value == want.Value
			})
			lacking := slices.IndexFunc(rp.peers, func(p string) bool { return !seriesHasLabel(p, f.label) })
			switch {
			case lacking < 0 && !found:
				problems = append(problems, fmt.Sprintf("%s is not filtered by %s", vs.Name, want))
			case lacking >= 0 && found:
				problems = append(problems, fmt.Sprintf("%s is filtered by %s in a ratio with %s, which has no %s: filter both sides alike",
					vs.Name, want, rp.peers[lacking], f.label))
			}
		}
	}
	return problems
}

// TestLintCatchesMistakes pins that the checks above can fail: each
// expression has exactly one mistake, and the check reports it.
func TestLintCatchesMistakes(t *testing.T) {
	tests := []struct {
		name string
		lint func(string) []string
		expr string
		want string
	}{
		{"unknown metric", lintContract, `rate(gotry_requests_total[1m])`, `metric "gotry_requests_total" is not in the contract`},
		{"histogram family without suffix", lintContract, `rate(gotry_request_duration_seconds[1m])`, `metric "gotry_request_duration_seconds" is not in the contract`},
		{"label the metric lacks", lintContract, `gotry_hedges_total{gotry_attempt_kind="hedge"}`, `gotry_hedges_total has no label "gotry_attempt_kind"`},
		{"service_name is not a series label", lintContract, `gotry_hedges_total{service_name="api"}`, `has no label "service_name"`},
		{"no matcher on le", lintContract, `gotry_request_duration_seconds_bucket{le="1"}`, `matches on le, whose spelling differs`},
		{"le only on buckets", lintContract, `gotry_request_duration_seconds_count{le="1"}`, `has no label "le"`},
		{"value outside closed set", lintContract, `gotry_attempts_total{gotry_attempt_outcome="canceled"}`, `"canceled" is not a value of gotry_attempt_outcome`},
		{"alternation outside closed set", lintContract, `gotry_request_duration_seconds_count{gotry_reason!~"success|not-retryable"}`, `"not-retryable" is not a value of gotry_reason`},
		{"grouping label nobody carries", lintContract, `sum by (gotry_reason) (gotry_attempts_total)`, `no metric below carries "gotry_reason"`},
		{"syntax error", lintContract, `sum(rate(gotry_attempts_total[1m])`, `does not parse`},
		{"missing filter", lintFilters, `rate(gotry_hedges_total{job=~"$job", server_address=~"$host"}[$__rate_interval])`, `gotry_hedges_total is not filtered by http_request_method=~"$method"`},
		{"equality instead of regexp filter", lintFilters, `rate(gotry_breaker_rejections_total{job="$job", server_address=~"$host"}[$__rate_interval])`, `not filtered by job=~"$job"`},
		{"ratio filtered on a label one side lacks", lintFilters, `sum(rate(gotry_limit_shed_total{job=~"$job", server_address=~"$host"}[$__rate_interval])) / sum(rate(gotry_request_duration_seconds_count{job=~"$job", server_address=~"$host", http_request_method=~"$method"}[$__rate_interval]))`, `gotry_request_duration_seconds_count is filtered by http_request_method=~"$method" in a ratio with gotry_limit_shed_total, which has no http_request_method`},
		{"ratio missing a filter both sides carry", lintFilters, `sum(rate(gotry_limit_shed_total{job=~"$job"}[$__rate_interval])) / sum(rate(gotry_request_duration_seconds_count{job=~"$job", server_address=~"$host"}[$__rate_interval]))`, `gotry_limit_shed_total is not filtered by server_address=~"$host"`},
		{"fixed range", lintFilters, `rate(gotry_breaker_rejections_total{job=~"$job", server_address=~"$host"}[5m])`, `range [5m] should be [$__rate_interval]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.lint(tt.expr)
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Errorf("lint(%q) = %q, want one problem containing %q", tt.expr, got, tt.want)
			}
		})
	}
}

// TestLintAcceptsContract pins the other side: well-formed expressions over
// every series of the contract pass.
func TestLintAcceptsContract(t *testing.T) {
	for _, m := range Contract() {
		for _, s := range m.SeriesNames() {
			expr := selector(s)
			if strings.HasSuffix(s, "_bucket") || m.Kind == Counter {
				expr = rate(expr)
			}
			if got := append(lintContract(keepVariables(expr)), lintFilters(expr)...); len(got) != 0 {
				t.Errorf("%s: %q", expr, got)
			}
		}
	}
}
