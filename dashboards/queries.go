package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Query is one PromQL expression of one panel target.
type Query struct {
	// Dashboard is the dashboard's UID.
	Dashboard string
	// Row is the title of the row the panel sits in, "" before any row.
	Row string
	// Panel is the panel's title.
	Panel string
	// RefID is the target's ref id (A, B, ...).
	RefID string
	// Expr is the expression as Grafana stores it, template variables and
	// all; pass it through Substitute before sending it to Prometheus.
	Expr string
}

// Queries returns every query of every generated dashboard, in layout
// order. The tests pin the checked-in JSON to Generate, so these are also
// the queries of the files in grafana/.
func Queries() ([]Query, error) {
	files, err := Generate()
	if err != nil {
		return nil, err
	}
	var all []Query
	for _, f := range files {
		qs, err := QueriesFromJSON(f.Data)
		if err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", f.Name, err)
		}
		all = append(all, qs...)
	}
	return all, nil
}

// QueriesFromJSON decodes a dashboard with the Grafana Foundation SDK and
// returns the expression of every panel target, those of panels inside
// collapsed rows included. A target that is not a Prometheus query is an
// error: every gotry panel queries Prometheus.
func QueriesFromJSON(data []byte) ([]Query, error) {
	// The SDK decodes panel options and targets through a registry of
	// plugins; registering is idempotent and safe for concurrent use.
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard //nolint:staticcheck // v1 schema on purpose, see dashboards.go
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboards: decoding dashboard: %w", err)
	}
	uid := deref(d.Uid)
	var out []Query
	add := func(rowTitle string, p dashboard.Panel) error {
		for i, tg := range p.Targets {
			q, ok := tg.(*prometheus.Dataquery)
			if !ok {
				return fmt.Errorf("dashboards: panel %q target %d: %T is not a Prometheus query", deref(p.Title), i, tg)
			}
			out = append(out, Query{Dashboard: uid, Row: rowTitle, Panel: deref(p.Title), RefID: deref(q.RefId), Expr: q.Expr})
		}
		return nil
	}
	rowTitle := ""
	for _, p := range d.Panels {
		switch {
		case p.RowPanel != nil:
			rowTitle = deref(p.RowPanel.Title)
			for _, inner := range p.RowPanel.Panels {
				if err := add(rowTitle, inner); err != nil {
					return nil, err
				}
			}
		case p.Panel != nil:
			if err := add(rowTitle, *p.Panel); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SubstituteInterval is the duration Substitute puts in place of Grafana's
// interval variables ($__rate_interval, $__interval): long enough to span
// several scrapes at the usual 15s scrape interval.
const SubstituteInterval = "1m"

// SubstituteRange is the duration Substitute puts in place of $__range.
const SubstituteRange = "1h"

// variableRef matches a Grafana template variable reference in its three
// spellings: $name, ${name} or ${name:format}, and [[name]] or
// [[name:format]]. The submatch holding the name is the first non-empty one.
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)`)

// variableRefs returns the names of the template variables s refers to, in
// order, repeats included.
func variableRefs(s string) []string {
	var names []string
	for _, m := range variableRef.FindAllStringSubmatch(s, -1) {
		for _, name := range m[1:] {
			if name != "" {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

// builtinValue returns what Substitute puts in place of one of Grafana's
// built-in variables, and false for a user variable.
func builtinValue(name string) (string, bool) {
	switch name {
	case "__rate_interval", "__interval":
		return SubstituteInterval, true
	case "__rate_interval_ms":
		return "60000", true
	case "__range":
		return SubstituteRange, true
	case "__interval_ms":
		return "60000", true
	case "__range_s":
		return "3600", true
	case "__range_ms":
		return "3600000", true
	}
	return "", false
}

// Substitute turns a dashboard expression into one a plain Prometheus
// accepts, the way Grafana would with every variable set to All: interval
// variables become SubstituteInterval, $__range becomes SubstituteRange, and
// every other variable becomes ".*". That is right for gotry's dashboards,
// whose variables only ever appear as label=~"$variable" matchers; a
// variable used elsewhere would need a real value.
func Substitute(expr string) string {
	return substitute(expr, func(string) string { return ".*" })
}

// SubstituteVars is Substitute with the user variables named in vars set to
// their values, the way Grafana would with those picked in the drop-downs.
// A value is put in as is, so it must be a regular expression that fits a
// =~ matcher ("gotry-demo", "a|b"); variables not in vars become ".*".
func SubstituteVars(expr string, vars map[string]string) string {
	return substitute(expr, func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return ".*"
	})
}

// substitute replaces Grafana's built-in variables as Substitute does and
// every user variable with user(name).
func substitute(expr string, user func(name string) string) string {
	return variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		name := variableRefs(ref)[0]
		if v, ok := builtinValue(name); ok {
			return v
		}
		return user(name)
	})
}
