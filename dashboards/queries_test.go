package dashboards

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

func TestSubstitute(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"rate interval", `rate(x[$__rate_interval])`, `rate(x[1m])`},
		{"interval", `avg_over_time(x[$__interval])`, `avg_over_time(x[1m])`},
		{"range", `increase(x[$__range])`, `increase(x[1h])`},
		{"rate interval is not cut short at $__rate", `x[$__rate_interval] offset $__interval`, `x[1m] offset 1m`},
		{"dollar variable", `x{job=~"$job"}`, `x{job=~".*"}`},
		{"braced variable", `x{job=~"${job}"}`, `x{job=~".*"}`},
		{"braced variable with format", `x{job=~"${job:regex}"}`, `x{job=~".*"}`},
		{"bracketed variable", `x{job=~"[[job]]"}`, `x{job=~".*"}`},
		{"several variables", `x{job=~"$job", server_address=~"$host"}[$__rate_interval]`, `x{job=~".*", server_address=~".*"}[1m]`},
		{"no variables", `sum(rate(x[5m]))`, `sum(rate(x[5m]))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Substitute(tt.expr); got != tt.want {
				t.Errorf("Substitute(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

// TestSubstitutedQueriesParse pins what a test against a real Prometheus
// relies on: every dashboard query, substituted, is valid PromQL with no
// variable left.
func TestSubstituteVars(t *testing.T) {
	tests := []struct {
		name string
		expr string
		vars map[string]string
		want string
	}{
		{"set variable", `x{job=~"$job"}[$__rate_interval]`, map[string]string{"job": "gotry-demo"}, `x{job=~"gotry-demo"}[1m]`},
		{"unset variable is All", `x{job=~"$job", server_address=~"${host}"}`, map[string]string{"job": "a|b"}, `x{job=~"a|b", server_address=~".*"}`},
		{"no vars is Substitute", `x{job=~"[[job]]"}`, nil, `x{job=~".*"}`},
		{"built-ins are not variables", `x[$__range]`, map[string]string{"__range": "5m"}, `x[1h]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SubstituteVars(tt.expr, tt.vars); got != tt.want {
				t.Errorf("SubstituteVars(%q, %v) = %q, want %q", tt.expr, tt.vars, got, tt.want)
			}
		})
	}
}

func TestSubstitutedQueriesParse(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		expr := Substitute(q.Expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s / %s: %q still holds a variable", q.Panel, q.RefID, expr)
		}
		if _, err := parser.ParseExpr(expr); err != nil {
			t.Errorf("%s / %s: %q: %v", q.Panel, q.RefID, expr, err)
		}
	}
}

func TestQueriesFromJSON(t *testing.T) {
	const ds = `"datasource": {"type": "prometheus", "uid": "${datasource}"}`
	target := func(ref, expr string) string {
		return `{` + ds + `, "refId": "` + ref + `", "expr": "` + expr + `"}`
	}
	data := `{"uid": "test", "title": "t", "panels": [
		{"type": "timeseries", "id": 1, "title": "Top", ` + ds + `, "targets": [` + target("A", "up") + `]},
		{"type": "row", "id": 2, "title": "Open row", "collapsed": false, "panels": []},
		{"type": "timeseries", "id": 3, "title": "Under open row", ` + ds + `, "targets": [` + target("A", "a") + `, ` + target("B", "b") + `]},
		{"type": "row", "id": 4, "title": "Collapsed row", "collapsed": true, "panels": [
			{"type": "stat", "id": 5, "title": "Inside", ` + ds + `, "targets": [` + target("A", "c") + `]}
		]}
	]}`
	got, err := QueriesFromJSON([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{
		{Dashboard: "test", Row: "", Panel: "Top", RefID: "A", Expr: "up"},
		{Dashboard: "test", Row: "Open row", Panel: "Under open row", RefID: "A", Expr: "a"},
		{Dashboard: "test", Row: "Open row", Panel: "Under open row", RefID: "B", Expr: "b"},
		{Dashboard: "test", Row: "Collapsed row", Panel: "Inside", RefID: "A", Expr: "c"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("QueriesFromJSON =\n%v\nwant\n%v", got, want)
	}
}

func TestQueriesFromJSONRejects(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"not JSON", `{`},
		{"non-Prometheus target", `{"uid": "x", "panels": [{"type": "timeseries", "title": "logs",
			"datasource": {"type": "loki", "uid": "l"},
			"targets": [{"refId": "A", "expr": "{app=\"x\"}"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if qs, err := QueriesFromJSON([]byte(tt.data)); err == nil {
				t.Errorf("QueriesFromJSON = %v, want an error", qs)
			}
		})
	}
}

func ExampleSubstitute() {
	fmt.Println(Substitute(`sum(rate(gotry_hedges_total{job=~"$job", server_address=~"${host}"}[$__rate_interval]))`))
	// Output: sum(rate(gotry_hedges_total{job=~".*", server_address=~".*"}[1m]))
}

// ExampleQueries shows how a test against a real Prometheus gets the
// queries to run: each one substituted, labelled with where it comes from.
func ExampleQueries() {
	qs, err := Queries()
	if err != nil {
		panic(err)
	}
	for _, q := range qs {
		if q.Panel == "Hedge rate" {
			fmt.Printf("%s / %s / %s %s:\n%s\n", q.Dashboard, q.Row, q.Panel, q.RefID, Substitute(q.Expr))
		}
	}
	// Output:
	// gotry-http-client / Hedging / Hedge rate A:
	// sum by (server_address) (rate(gotry_hedges_total{job=~".*", server_address=~".*", http_request_method=~".*"}[1m]))
}
