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

// Allocations per successful request beyond the bare base, as issue #13
// states them ("target") and as the test enforces them today. Where the two
// differ the code does not reach the target yet; lower the enforced figure
// when it does, and whenever the code gets cheaper.
const (
	// transport.New(base): the target, and met.
	defaultsExtraAllocs = 0

	// A breaker and a per-attempt timeout, no hedging: no target of its
	// own; it separates hedging's cost from the rest of "armed".
	breakerTimeoutExtraAllocs = 4

	// Breaker + hedging armed (1s, never fires) + per-attempt timeout 5s:
	// the target, and met (it was 10 while the first attempt ran on a
	// goroutine of its own). The four: the attempt's cancelable context
	// and its cancel func, the request clone that carries it, and the body
	// wrapper that cancels it when the body is closed.
	armedExtraAllocsTarget = 4
	armedExtraAllocs       = 4

	// WithPerAttemptHeaderTimeout (issue #30): no target; "zero when
	// unset" is defaultsExtraAllocs. The base here reports no write, so the
	// timer is not armed (over a real base the timer and its callback add
	// two): the headerTimer, the cancelable context and its cancel func,
	// the ClientTrace, its WroteRequest method value, httptrace's context,
	// the request clone and the body wrapper that cancels the context on
	// Close.
	headerTimeoutExtraAllocs = 8

	// The concurrency limit alone (issue 23: "zero allocations on the
	// success path").
	limitExtraAllocs = 0
)

// TestAllocationsPerRequest pins how many allocations one successful
// request costs beyond the bare base, so a regression on the hot path fails
// here rather than in a benchmark nobody reads. Each configuration is
// measured the way the issue measures it, through an *http.Client, and by
// calling RoundTrip directly; both are compared with bare measured the same
// way.
func TestAllocationsPerRequest(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://bench.local/item", nil)
	paths := []struct {
		name string
		per  func(rt http.RoundTripper) float64
	}{
		{"through http.Client", func(rt http.RoundTripper) float64 {
			c := &http.Client{Transport: rt}
			return testing.AllocsPerRun(200, func() {
				if err := do(c, req); err != nil {
					t.Fatal(err)
				}
			})
		}},
		{"RoundTrip directly", func(rt http.RoundTripper) float64 {
			return testing.AllocsPerRun(200, func() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			})
		}},
	}
	tests := []struct {
		name          string
		rt            http.RoundTripper
		extra, target float64 // enforced and wanted allocations beyond bare
	}{
		{"defaults", transport.New(memBase{}), defaultsExtraAllocs, defaultsExtraAllocs},
		{"breaker+timeout", transport.New(memBase{},
			transport.WithBreaker(resilience.BreakerConfig{}),
			transport.WithPerAttemptTimeout(5*time.Second)), breakerTimeoutExtraAllocs, breakerTimeoutExtraAllocs},
		{"armed: breaker+hedging(1s)+timeout", armed(memBase{}), armedExtraAllocs, armedExtraAllocsTarget},
		{"header timeout", transport.New(memBase{}, transport.WithPerAttemptHeaderTimeout(5*time.Second)), headerTimeoutExtraAllocs, headerTimeoutExtraAllocs},
		{"concurrency limit", transport.New(memBase{}, transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{})), limitExtraAllocs, limitExtraAllocs},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			bare := p.per(memBase{})
			t.Logf("bare: %.0f allocations", bare)
			for _, tc := range tests {
				got := p.per(tc.rt) - bare
				t.Logf("%s: %.0f beyond bare (enforced ≤ %.0f, target ≤ %.0f)", tc.name, got, tc.extra, tc.target)
				if got > tc.extra {
					t.Errorf("%s: %.0f allocations beyond bare, want at most %.0f", tc.name, got, tc.extra)
				}
			}
		})
	}
}
