//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are pinned in normal builds only.

package telemetry

import (
	"io"
	"net/http"
	"testing"
)

// TestAllocationsWithTelemetry pins issue #13's bound: a request through
// gotry with full telemetry (request and attempt spans, metrics, zap at
// info) allocates no more than the same request through otelhttp alone,
// measured here side by side, under both BenchmarkRoundTrip tracer
// providers. A change that adds an allocation to the hot path of the hooks
// fails here.
func TestAllocationsWithTelemetry(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	per := func(rt http.RoundTripper) float64 {
		req, err := http.NewRequest(http.MethodGet, "http://api.example:8080/items", nil)
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(500, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	for _, tc := range []struct {
		name  string
		batch bool
	}{
		{"sampled", false},
		{"batcher", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]float64{}
			for _, bt := range benchTransports(t, tc.batch) {
				got[bt.name] = per(bt.rt)
			}
			if got["gotry+telemetry"] > got["otelhttp"] {
				t.Errorf("gotry+telemetry: %.0f allocations per request, otelhttp alone %.0f; want at most as many",
					got["gotry+telemetry"], got["otelhttp"])
			}
			t.Logf("allocations per request: %v", got)
		})
	}
}
