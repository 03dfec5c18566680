package transport_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestBreakerKeyIsNormalisedHost: the spellings of one server share one
// breaker, and hooks report the normalised host.
func TestBreakerKeyIsNormalisedHost(t *testing.T) {
	cases := []struct {
		name      string
		spellings []string // each fails once; together they open the breaker
		then      string   // another spelling, rejected by the open breaker
		key       string
	}{
		{"case and default port", []string{"http://example.test/", "http://EXAMPLE.test/a", "http://example.test:80/b"}, "http://Example.Test:80/c", "example.test"},
		{"https default port", []string{"https://example.test/", "https://Example.test:443/"}, "https://EXAMPLE.TEST/x", "example.test"},
		{"other port kept", []string{"https://example.test:80/", "https://EXAMPLE.test:80/"}, "https://example.test:80/c", "example.test:80"},
		{"ipv6", []string{"http://[::1]/", "http://[::1]:80/"}, "http://[0:0::1]/x", "[::1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sent atomic.Int32
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				sent.Add(1)
				return fakeResponse(r, http.StatusServiceUnavailable, "down"), nil
			})
			var changes events[string]
			var rejects events[resilience.BreakerRejectEvent]
			tr := transport.New(base, transport.WithClock(newClock()), transport.WithMaxAttempts(1),
				transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: len(c.spellings), OpenDuration: time.Minute}),
				transport.WithHooks(transport.Hooks{
					OnBreakerStateChange: func(e resilience.BreakerStateEvent) { changes.add(e.Key + " " + e.To.String()) },
					OnBreakerReject:      rejects.add,
				}))
			for _, u := range c.spellings {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, u, nil))
				if err != nil {
					t.Fatalf("%s: %v", u, err)
				}
				resp.Body.Close()
			}
			_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, c.then, nil))
			if !errors.Is(err, transport.ErrCircuitOpen) {
				t.Fatalf("%s after %d failures: err = %v, want ErrCircuitOpen", c.then, len(c.spellings), err)
			}
			if got := sent.Load(); int(got) != len(c.spellings) {
				t.Errorf("base saw %d requests, want %d", got, len(c.spellings))
			}
			if got := changes.get(); len(got) != 1 || got[0] != c.key+" open" {
				t.Errorf("state changes %q, want [%q]", got, c.key+" open")
			}
			if got := rejects.get(); len(got) != 1 || got[0].Key != c.key {
				t.Errorf("reject events %+v, want one for host %q", got, c.key)
			}
			if got := breakerState(tr, c.key); got != resilience.BreakerOpen {
				t.Errorf("%q's breaker = %v, want open", c.key, got)
			}
		})
	}
}
