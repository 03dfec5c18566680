package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"
)

const regenerate = "run `go generate ./...` in dashboards/ (or `go run ./cmd/gen -dir grafana`) and commit the result"

// checkedIn returns the checked-in dashboard files by name.
func checkedIn(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("grafana", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no dashboards in grafana/: %s", regenerate)
	}
	files := make(map[string][]byte)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	return files
}

// decodeStrict decodes a dashboard strictly: a field the SDK does not know
// is an error.
func decodeStrict(data []byte) (dashboard.Dashboard, error) { //nolint:staticcheck // v1 schema on purpose, see dashboards.go
	plugins.RegisterDefaultPlugins()
	var d dashboard.Dashboard //nolint:staticcheck // v1 schema on purpose, see dashboards.go
	err := d.UnmarshalJSONStrict(data)
	// The SDK (v0.0.22) returns an empty cog.BuildErrors, not nil, on
	// success.
	if be, ok := err.(cog.BuildErrors); ok && len(be) == 0 {
		err = nil
	}
	return d, err
}

// decode is decodeStrict failing t on error.
func decode(t *testing.T, name string, data []byte) dashboard.Dashboard { //nolint:staticcheck // v1 schema on purpose, see dashboards.go
	t.Helper()
	d, err := decodeStrict(data)
	if err != nil {
		t.Fatalf("%s: decoding strictly: %v", name, err)
	}
	return d
}

func TestDecodeStrictRejectsUnknownFields(t *testing.T) {
	for name, data := range checkedIn(t) {
		bad := bytes.Replace(data, []byte(`"title": "Overview"`), []byte(`"title": "Overview", "bogus": 1`), 1)
		if bytes.Equal(bad, data) {
			t.Fatalf("%s: no Overview row to corrupt", name)
		}
		if _, err := decodeStrict(bad); err == nil {
			t.Errorf("%s: decodeStrict accepted an unknown field", name)
		}
	}
}

func TestCheckedInDashboardsMatchGenerator(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	onDisk := checkedIn(t)
	for _, f := range files {
		got, ok := onDisk[f.Name]
		delete(onDisk, f.Name)
		switch {
		case !ok:
			t.Errorf("grafana/%s is missing: %s", f.Name, regenerate)
		case !bytes.Equal(got, f.Data):
			t.Errorf("grafana/%s differs from the generator (first difference at line %d): %s", f.Name, firstDiffLine(got, f.Data), regenerate)
		}
	}
	for name := range onDisk {
		t.Errorf("grafana/%s is not generated: delete it, or generate it from cmd/gen", name)
	}
}

// firstDiffLine returns the 1-based line where a and b first differ.
func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s: two runs differ at line %d", a[i].Name, firstDiffLine(a[i].Data, b[i].Data))
		}
	}
}

func TestDashboardLayout(t *testing.T) {
	want := map[string]string{}
	for _, s := range specs() {
		want[s.file] = s.uid
	}
	for name, data := range checkedIn(t) {
		d := decode(t, name, data)
		if got := deref(d.Uid); got != want[name] || len(got) > 40 {
			t.Errorf("%s: uid %q, want %q (at most 40 characters)", name, got, want[name])
		}
		ids := map[uint32]string{}
		for _, p := range panels(d) {
			if p.Panel.Id == nil {
				t.Errorf("%s: panel %q has no id", name, deref(p.Panel.Title))
				continue
			}
			if prev, dup := ids[*p.Panel.Id]; dup {
				t.Errorf("%s: panels %q and %q share id %d", name, prev, deref(p.Panel.Title), *p.Panel.Id)
			}
			ids[*p.Panel.Id] = deref(p.Panel.Title)
			if g := p.Panel.GridPos; g == nil || g.X+g.W > 24 || g.W == 0 || g.H == 0 {
				t.Errorf("%s: panel %q has grid position %+v, want inside the 24-column grid", name, deref(p.Panel.Title), g)
			}
			if deref(p.Panel.Title) == "" || deref(p.Panel.Description) == "" {
				t.Errorf("%s: panel %d needs a title and a description", name, *p.Panel.Id)
			}
		}
	}
}

// rowPanel is a panel with the title of the row it sits in.
type rowPanel struct {
	row   string
	Panel dashboard.Panel
}

// panels returns every non-row panel of d, those in collapsed rows too.
func panels(d dashboard.Dashboard) []rowPanel { //nolint:staticcheck // v1 schema on purpose, see dashboards.go
	var out []rowPanel
	row := ""
	for _, p := range d.Panels {
		switch {
		case p.RowPanel != nil:
			row = deref(p.RowPanel.Title)
			for _, inner := range p.RowPanel.Panels {
				out = append(out, rowPanel{row, inner})
			}
		case p.Panel != nil:
			out = append(out, rowPanel{row, *p.Panel})
		}
	}
	return out
}

func TestPanelsUseDatasourceVariable(t *testing.T) {
	want := "${" + VarDatasource + "}"
	for name, data := range checkedIn(t) {
		for _, p := range panels(decode(t, name, data)) {
			title := deref(p.Panel.Title)
			if ds := p.Panel.Datasource; ds == nil || deref(ds.Uid) != want || deref(ds.Type) != "prometheus" {
				t.Errorf("%s: panel %q datasource %+v, want prometheus %s", name, title, ds, want)
			}
			if len(p.Panel.Targets) == 0 {
				t.Errorf("%s: panel %q has no targets", name, title)
			}
		}
		// Targets carry the datasource too; check them in the raw JSON,
		// where it is a plain field.
		var raw struct {
			Panels []struct {
				Title   string
				Targets []struct {
					Datasource struct{ Type, UID string }
				}
			}
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		for _, p := range raw.Panels {
			for i, tg := range p.Targets {
				if tg.Datasource.UID != want || tg.Datasource.Type != "prometheus" {
					t.Errorf("%s: panel %q target %d datasource %+v, want prometheus %s", name, p.Title, i, tg.Datasource, want)
				}
			}
		}
	}
}

// queriesOf returns the queries of every checked-in dashboard.
func queriesOf(t *testing.T) []Query {
	t.Helper()
	var all []Query
	for name, data := range checkedIn(t) {
		qs, err := QueriesFromJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		all = append(all, qs...)
	}
	if len(all) == 0 {
		t.Fatal("the dashboards have no queries")
	}
	return all
}

func TestQueriesFollowContract(t *testing.T) {
	for _, q := range queriesOf(t) {
		problems := append(lintContract(keepVariables(q.Expr)), lintFilters(q.Expr)...)
		for _, p := range problems {
			t.Errorf("%s / %s / %s %s: %s\n\t%s", q.Dashboard, q.Row, q.Panel, q.RefID, p, q.Expr)
		}
	}
}

func TestEveryMetricIsCharted(t *testing.T) {
	charted := map[string]bool{}
	for _, q := range queriesOf(t) {
		for _, name := range metricNames(t, Substitute(q.Expr)) {
			m, _ := LookupSeries(name)
			charted[m.Name] = true
		}
	}
	for _, m := range Contract() {
		if !charted[m.Name] {
			t.Errorf("no panel charts %s", m.Name)
		}
	}
}

// builtinVariables are the Grafana built-ins the dashboards may refer to.
func builtinVariables() []string {
	return []string{"__all", "__rate_interval", "__interval", "__range"}
}

func TestTemplateVariables(t *testing.T) {
	for name, data := range checkedIn(t) {
		d := decode(t, name, data)
		var defined []string
		for _, v := range d.Templating.List {
			defined = append(defined, v.Name)
		}
		if want := []string{VarDatasource, VarJob, VarHost, VarMethod}; !slices.Equal(defined, want) {
			t.Errorf("%s: variables %v, want %v", name, defined, want)
		}

		for i, v := range d.Templating.List {
			// A variable's definition may only use the variables before it.
			def, _ := json.Marshal(v)
			for _, ref := range variableRefs(string(def)) {
				if !slices.Contains(defined[:i], ref) && !slices.Contains(builtinVariables(), ref) {
					t.Errorf("%s: variable %q refers to $%s, which is not defined before it", name, v.Name, ref)
				}
			}
			if v.Name == VarDatasource {
				if v.Type != dashboard.VariableTypeDatasource || v.Query == nil || deref(v.Query.String) != "prometheus" {
					t.Errorf("%s: $%s is %s %+v, want a prometheus datasource variable", name, v.Name, v.Type, v.Query)
				}
				continue
			}
			if v.Multi == nil || !*v.Multi || v.IncludeAll == nil || !*v.IncludeAll || deref(v.AllValue) != ".*" {
				t.Errorf("%s: $%s must be multi-select with All = .*", name, v.Name)
			}
			if v.Query == nil || v.Query.String == nil {
				t.Errorf("%s: $%s has no query", name, v.Name)
				continue
			}
			checkLabelValuesQuery(t, name, v.Name, *v.Query.String)
		}
		if got, want := deref(d.Templating.List[1].Query.String), "label_values(gotry_attempts_total, job)"; got != want {
			t.Errorf("%s: $job query %q, want %q", name, got, want)
		}

		// Every reference anywhere in the dashboard names a variable.
		for _, ref := range variableRefs(string(data)) {
			if !slices.Contains(defined, ref) && !slices.Contains(builtinVariables(), ref) {
				t.Errorf("%s: $%s is referred to but not defined", name, ref)
			}
		}
	}
}

// checkLabelValuesQuery checks a label_values(selector, label) variable
// query: the selector is in the contract and its metric carries label.
func checkLabelValuesQuery(t *testing.T, dash, variable, q string) {
	t.Helper()
	inner, ok := strings.CutPrefix(q, "label_values(")
	inner, ok2 := strings.CutSuffix(inner, ")")
	i := strings.LastIndex(inner, ",")
	if !ok || !ok2 || i < 0 {
		t.Errorf("%s: $%s query %q is not label_values(selector, label)", dash, variable, q)
		return
	}
	sel, label := strings.TrimSpace(inner[:i]), strings.TrimSpace(inner[i+1:])
	for _, p := range lintContract(keepVariables(sel)) {
		t.Errorf("%s: $%s query %q: %s", dash, variable, q, p)
	}
	e, err := parser.ParseExpr(keepVariables(sel))
	if err != nil {
		return // reported above
	}
	for _, vs := range selectors(e) {
		if !seriesHasLabel(vs.Name, label) {
			t.Errorf("%s: $%s query %q: %s has no label %q", dash, variable, q, vs.Name, label)
		}
	}
}

func TestQueriesMatchCheckedInFiles(t *testing.T) {
	got, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	want := queriesOf(t)
	key := func(q Query) string { return q.Dashboard + "\x00" + q.Panel + "\x00" + q.RefID + "\x00" + q.Expr }
	gotKeys, wantKeys := make([]string, len(got)), make([]string, len(want))
	for i, q := range got {
		gotKeys[i] = key(q)
	}
	for i, q := range want {
		wantKeys[i] = key(q)
	}
	slices.Sort(gotKeys)
	slices.Sort(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("Queries() returns %d queries, the checked-in files hold %d different ones: %s", len(got), len(want), regenerate)
	}
	for _, q := range got {
		if q.Dashboard == "" || q.Row == "" || q.Panel == "" || q.RefID == "" || q.Expr == "" {
			t.Errorf("query with an empty field: %+v", q)
		}
	}
}
