package sdktest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/MrVSiK/gotry/clock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// queryOK is the Prometheus HTTP API's answer to an instant query.
func queryOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
}

// TestPrometheusQueryIsRetried: Prometheus' API client sends every query
// as a POST whose Idempotency-Key entry has no value (req.Header
// ["Idempotency-Key"] = nil, which marks it idempotent without sending a
// header). Through gotry, a query that meets a 503 or 429 with
// Retry-After, or a reset connection, is retried, with the same form
// body, and succeeds.
func TestPrometheusQueryIsRetried(t *testing.T) {
	tests := []struct {
		name  string
		steps []http.HandlerFunc
	}{
		{"503 then 429 with Retry-After", []http.HandlerFunc{
			status(http.StatusServiceUnavailable, "Retry-After", "1"),
			status(http.StatusTooManyRequests, "Retry-After", "2"),
			queryOK,
		}},
		{"connection reset", []http.HandlerFunc{reset, queryOK}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFailing(t, tc.steps...)
			// From now, so the context's real deadline lies ahead of it: the
			// engine reads deadlines against its clock.
			fc := clock.NewFake(time.Now())
			var calls ends
			tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithMaxAttempts(3),
				transport.WithHooks(transport.Hooks{OnCallEnd: calls.add}))
			client, err := api.NewClient(api.Config{Address: srv.URL, RoundTripper: tr})
			if err != nil {
				t.Fatal(err)
			}
			stop := advancing(t, fc, 2*time.Second)
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			if _, _, err := v1.NewAPI(client).Query(ctx, "up", time.Time{}); err != nil {
				t.Fatalf("Query: %v (gotry calls: %+v)", err, calls.get())
			}
			got := calls.get()
			if len(got) != 1 || got[0].Attempts != len(tc.steps) || got[0].Reason != resilience.ReasonSuccess {
				t.Fatalf("gotry calls %+v, want one that succeeded after %d attempts", got, len(tc.steps))
			}
			bodies := srv.received()
			if len(bodies) != len(tc.steps) {
				t.Fatalf("server saw %d requests, want %d", len(bodies), len(tc.steps))
			}
			for i, b := range bodies {
				if b != bodies[0] || b == "" {
					t.Errorf("request %d sent %q, want the first's %q", i+1, b, bodies[0])
				}
			}
		})
	}
}
