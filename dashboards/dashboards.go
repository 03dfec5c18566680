package dashboards

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	// The SDK deprecates the v1 dashboard types in favour of dashboardv2,
	// but the generated JSON is the v1 schema on purpose (v2 is a different
	// format) and SDK v0.0.22 is pinned, so each use of dashboard.Dashboard
	// and its builder carries a //nolint:staticcheck (SA1019).
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Template variables of every generated dashboard. VarJob, VarHost and
// VarMethod are multi-select with an "All" option whose value is ".*"; every
// query filters with label=~"$variable" on each of them whose label the
// queried metric carries.
const (
	VarDatasource = "datasource"
	VarJob        = "job"
	VarHost       = "host"
	VarMethod     = "method"
)

// File is one generated dashboard.
type File struct {
	// Name is the file name under grafana/, such as "gotry.json".
	Name string
	// UID is the dashboard's stable Grafana UID.
	UID string
	// Data is the dashboard as indented JSON ending in a newline.
	Data []byte
}

// dashboardSpec is one dashboard to generate.
type dashboardSpec struct {
	file  string
	uid   string
	build func(uid string) (dashboard.Dashboard, error) //nolint:staticcheck // v1 schema on purpose, see the import
}

// specs lists the generated dashboards in file order.
func specs() []dashboardSpec {
	return []dashboardSpec{
		{file: "gotry.json", uid: "gotry-http-client", build: gotryDashboard},
	}
}

// Generate builds every dashboard and returns its JSON, in a stable order.
// The output depends on nothing but this package, so it is byte-for-byte
// reproducible; cmd/gen writes it to grafana/.
func Generate() ([]File, error) {
	var files []File
	for _, s := range specs() {
		d, err := s.build(s.uid)
		if err != nil {
			return nil, fmt.Errorf("dashboards: building %s: %w", s.file, err)
		}
		data, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("dashboards: encoding %s: %w", s.file, err)
		}
		files = append(files, File{Name: s.file, UID: s.uid, Data: append(data, '\n')})
	}
	return files, nil
}

// filter ties a template variable to the label it filters on.
type filter struct {
	variable string
	label    string
}

// filters returns the label-filtering variables in the order they are
// defined: each one's values are looked up under the ones before it.
func filters() []filter {
	return []filter{
		{VarJob, LabelJob},
		{VarHost, LabelServer},
		{VarMethod, LabelMethod},
	}
}

// selector returns series{...} filtered by every template variable whose
// label the series carries, followed by the extra matchers.
func selector(series string, extra ...string) string {
	var ms []string
	for _, f := range filters() {
		if seriesHasLabel(series, f.label) {
			ms = append(ms, fmt.Sprintf(`%s=~"$%s"`, f.label, f.variable))
		}
	}
	ms = append(ms, extra...)
	return series + "{" + strings.Join(ms, ", ") + "}"
}

// selectorLike is selector(series, extra...) filtered only by the template
// variables whose label like carries too. The two sides of a ratio of
// series with different labels take it, each with the other as like, so
// that both are filtered alike: filtering one side on a label the other
// lacks would divide all of one by a selected part of the other (sheds of
// every method per request of one method).
func selectorLike(series, like string, extra ...string) string {
	var ms []string
	for _, f := range filters() {
		if seriesHasLabel(series, f.label) && seriesHasLabel(like, f.label) {
			ms = append(ms, fmt.Sprintf(`%s=~"$%s"`, f.label, f.variable))
		}
	}
	ms = append(ms, extra...)
	return series + "{" + strings.Join(ms, ", ") + "}"
}

// eq returns the matcher label="value".
func eq(label, value string) string { return fmt.Sprintf("%s=%q", label, value) }

// notIn returns the matcher label!~"v1|v2|...".
func notIn(label string, values ...string) string {
	return fmt.Sprintf("%s!~%q", label, strings.Join(values, "|"))
}

// rate returns rate(sel[$__rate_interval]).
func rate(sel string) string { return "rate(" + sel + "[$__rate_interval])" }

// sumBy returns sum by (labels) (expr), or sum(expr) with no labels.
func sumBy(expr string, labels ...string) string { return agg("sum", expr, labels...) }

// agg returns op by (labels) (expr), or op(expr) with no labels.
func agg(op, expr string, labels ...string) string {
	if len(labels) == 0 {
		return op + "(" + expr + ")"
	}
	return op + " by (" + strings.Join(labels, ", ") + ") (" + expr + ")"
}

// quantile returns histogram_quantile(q, sum by (le, labels) (rate(bucket))).
func quantile(q float64, bucket string, labels ...string) string {
	by := append([]string{LabelBucket}, labels...)
	return fmt.Sprintf("histogram_quantile(%g, %s)", q, sumBy(rate(bucket), by...))
}

// div returns num / den. Both sides are aggregations, so no parentheses are
// needed.
func div(num, den string) string { return num + " / " + den }

// giveUp is the matcher that selects give-ups, as GotryHighGiveUpRatio
// counts them: every gotry_reason but success and not_retryable (the
// server's answer) and canceled (the caller's own decision), so a reason
// added later counts without an edit.
func giveUp() string {
	return notIn(LabelReason, ReasonSuccess, ReasonNotRetryable, ReasonCanceled)
}

// The series the panels query.
const (
	requestCount   = MetricRequestDuration + "_count"
	requestBucket  = MetricRequestDuration + "_bucket"
	attemptBucket  = MetricAttemptDuration + "_bucket"
	backoffBucket  = MetricBackoffDelay + "_bucket"
	timeLeftBucket = MetricRequestTimeLeft + "_bucket"
)

// datasource refers to the dashboard's datasource variable.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + VarDatasource + "}")}
}

// variables returns the dashboard's template variables.
func variables() []cog.Builder[dashboard.VariableModel] {
	vars := []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder(VarDatasource).
			Label("Data source").
			Type("prometheus"),
	}
	fs := filters()
	for i, f := range fs {
		// Each variable's values come from the series the ones before it
		// select, so picking a job narrows the hosts offered.
		var ms []string
		for _, prev := range fs[:i] {
			ms = append(ms, fmt.Sprintf(`%s=~"$%s"`, prev.label, prev.variable))
		}
		series := MetricAttempts
		if len(ms) > 0 {
			series += "{" + strings.Join(ms, ", ") + "}"
		}
		q := fmt.Sprintf("label_values(%s, %s)", series, f.label)
		vars = append(vars, dashboard.NewQueryVariableBuilder(f.variable).
			Label(variableLabels()[f.variable]).
			Datasource(datasource()).
			Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
			Definition(q).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*").
			Current(dashboard.VariableOption{
				Selected: cog.ToPtr(true),
				Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
				Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
			}))
	}
	return vars
}

// variableLabels returns the display label of each filtering variable.
func variableLabels() map[string]string {
	return map[string]string{VarJob: "Job", VarHost: "Host", VarMethod: "Method"}
}

// row is a titled group of panels.
type row struct {
	title  string
	panels []cog.Builder[dashboard.Panel]
}

// gotryDashboard is the one dashboard: an overview row, then a row per
// concern, all sharing the datasource, job, host and method variables.
func gotryDashboard(uid string) (dashboard.Dashboard, error) { //nolint:staticcheck // v1 schema on purpose, see the import
	//nolint:staticcheck // v1 schema on purpose, see the import
	b := dashboard.NewDashboardBuilder("gotry HTTP client").
		Uid(uid).
		Description("Requests, attempts, retries, hedges, retry budget and circuit breakers of gotry's retrying http.RoundTripper. Generated by dashboards/cmd/gen; edit the Go code, not this JSON.").
		Tags([]string{"gotry", "http-client", "generated"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Variables(variables())
	for _, r := range []row{overviewRow(), latencyRow(), retriesRow(), hedgingRow(), budgetRow(), breakersRow(), overloadRow(), fleetRow(), chainRow()} {
		b.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			b.WithPanel(p)
		}
	}
	d, err := b.Build()
	if err != nil {
		return dashboard.Dashboard{}, err //nolint:staticcheck // v1 schema on purpose, see the import
	}
	numberPanels(&d)
	return d, nil
}

// numberPanels gives every row and panel an id, in layout order, so the ids
// (and the viewPanel links that use them) are stable across regenerations.
func numberPanels(d *dashboard.Dashboard) { //nolint:staticcheck // v1 schema on purpose, see the import
	var id uint32
	for i := range d.Panels {
		p := &d.Panels[i]
		switch {
		case p.Panel != nil:
			id++
			p.Panel.Id = cog.ToPtr(id)
		case p.RowPanel != nil:
			id++
			p.RowPanel.Id = id
			for j := range p.RowPanel.Panels {
				id++
				p.RowPanel.Panels[j].Id = cog.ToPtr(id)
			}
		}
	}
}
