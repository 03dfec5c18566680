//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are pinned in normal builds only.

package telemetry

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestAllocationsWithTelemetry pins issue #13's bound: a request through
// gotry with full telemetry (request and attempt spans, metrics, zap at
// info) allocates no more than the same request through otelhttp alone,
// measured here side by side, under both BenchmarkRoundTrip tracer
// providers, without a deadline and with one (which adds the time left to
// the request span and gotry.request.time_left). A change that adds an
// allocation to the hot path of the hooks fails here.
func TestAllocationsWithTelemetry(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	// One context with a deadline for every run: making it allocates, and
	// that is the caller's cost, not the transport's.
	dl, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	per := func(ctx context.Context, rt http.RoundTripper) float64 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example:8080/items", nil)
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
		ctx   context.Context
	}{
		{"sampled", false, context.Background()},
		{"batcher", true, context.Background()},
		{"sampled with a deadline", false, dl},
		{"batcher with a deadline", true, dl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]float64{}
			for _, bt := range benchTransports(t, tc.batch) {
				got[bt.name] = per(tc.ctx, bt.rt)
			}
			if got["gotry+telemetry"] > got["otelhttp"] {
				t.Errorf("gotry+telemetry: %.0f allocations per request, otelhttp alone %.0f; want at most as many",
					got["gotry+telemetry"], got["otelhttp"])
			}
			t.Logf("allocations per request: %v", got)
		})
	}
}
