//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are pinned in normal builds only (make unit runs them).

package transport_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestAllocationsPerRequest pins how many allocations one successful
// request costs beyond the bare base, so a regression on the hot path fails
// here rather than in a benchmark nobody reads. The figures are today's;
// lower them when the code gets cheaper.
func TestAllocationsPerRequest(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	per := func(rt http.RoundTripper) float64 {
		return testing.AllocsPerRun(200, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	bare := per(memBase{})
	tests := []struct {
		name  string
		rt    http.RoundTripper
		extra float64 // at most this many allocations beyond bare
	}{
		{"defaults", transport.New(memBase{}), 0},
		{"breaker+budget+per-attempt timeout", transport.New(memBase{},
			transport.WithCircuitBreaker(resilience.BreakerConfig{}), transport.WithPerAttemptTimeout(time.Second)), 6},
		{"hedging armed, never fires", transport.New(memBase{}, transport.WithHedging(time.Second, 1)), 8},
	}
	for _, tc := range tests {
		if got := per(tc.rt) - bare; got > tc.extra {
			t.Errorf("%s: %.0f allocations beyond bare, want at most %.0f", tc.name, got, tc.extra)
		}
	}
}
