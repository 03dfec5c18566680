package dashboards

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestLatencyPanelsShowExemplars: every target of the latency panels asks
// for exemplars, so a point links to the trace of a request in that bucket.
func TestLatencyPanelsShowExemplars(t *testing.T) {
	want := map[string]bool{"Request latency": false, "Attempt latency": false, "p99 by host: request vs attempt": false}
	for name, data := range checkedIn(t) {
		var root any
		if err := json.Unmarshal(data, &root); err != nil {
			t.Fatal(err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				title, _ := v["title"].(string)
				if _, ok := want[title]; ok {
					targets, _ := v["targets"].([]any)
					for i, tg := range targets {
						if ex, _ := tg.(map[string]any)["exemplar"].(bool); !ex {
							t.Errorf("%s: %q target %d does not ask for exemplars", name, title, i)
						}
					}
					want[title] = len(targets) > 0
				}
				for _, c := range v {
					walk(c)
				}
			case []any:
				for _, c := range v {
					walk(c)
				}
			}
		}
		walk(root)
	}
	for title, seen := range want {
		if !seen {
			t.Errorf("no panel %q with targets", title)
		}
	}
}

// TestExampleDatasourceLinksExemplars: the example stack's Prometheus data
// source sends an exemplar's trace_id (the label the OTel exporter writes)
// to the Jaeger data source.
func TestExampleDatasourceLinksExemplars(t *testing.T) {
	b, err := os.ReadFile("../examples/otel-collector/grafana/provisioning/datasources/datasources.yaml")
	if err != nil {
		t.Skipf("example stack not beside the module: %v", err)
	}
	s := string(b)
	for _, want := range []string{"exemplarTraceIdDestinations:", "- name: trace_id", "datasourceUid: jaeger", "uid: jaeger"} {
		if !strings.Contains(s, want) {
			t.Errorf("datasources.yaml lacks %q", want)
		}
	}
}
