package dashboards

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestShedPerRequestWithOneMethodSelected evaluates "Shed per request by
// host" over a host that serves GET and POST alike (2 requests per second
// each) and sheds 0.4 initial attempts per second (sheds carry no
// method): whatever method is selected, the panel shows 0.1 sheds per
// request, not every method's sheds against one method's requests (0.2).
func TestShedPerRequestWithOneMethodSelected(t *testing.T) {
	target := fmt.Sprintf(`job="checkout", instance="checkout-1:9464", %s=%q, server_address="pay.internal"`, LabelScope, ScopeName)
	var b strings.Builder
	b.WriteString("load 30s\n")
	for _, m := range []string{"GET", "POST"} {
		fmt.Fprintf(&b, "  %s{%s, server_port=\"443\", http_request_method=%q, gotry_reason=\"success\", http_response_status_code=\"200\"} 0+60x20\n", requestCount, target, m)
	}
	fmt.Fprintf(&b, "  %s{%s, gotry_attempt_kind=\"initial\", gotry_criticality=\"default\"} 0+12x20\n", MetricLimitShed, target)
	fmt.Fprintf(&b, "  %s{%s, gotry_attempt_kind=\"hedge\", gotry_criticality=\"default\"} 0+30x20\n", MetricLimitShed, target)
	storage := promqltest.LoadedStorage(t, b.String())
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 50000)

	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, q := range qs {
		if q.Panel == "Shed per request by host" {
			expr = q.Expr
		}
	}
	if expr == "" {
		t.Fatal(`no panel "Shed per request by host"`)
	}
	for _, method := range []string{".*", "GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			q, err := engine.NewInstantQuery(context.Background(), storage, nil,
				SubstituteVars(expr, map[string]string{VarMethod: method}), time.Unix(0, 0).Add(8*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			vec, err := q.Exec(context.Background()).Vector()
			if err != nil {
				t.Fatal(err)
			}
			if len(vec) != 1 || math.Abs(vec[0].F-0.1) > 1e-9 {
				t.Errorf("method %s: %v, want pay.internal at 0.1 sheds per request", method, vec)
			}
		})
	}
}
