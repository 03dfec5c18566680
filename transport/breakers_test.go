package transport_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// TestOpenBreakersAreNotEvictedForNewHosts: with room for two breakers, both
// open, a third host is served untracked and counted, and the two open
// breakers keep rejecting until their OpenDuration ends.
func TestOpenBreakersAreNotEvictedForNewHosts(t *testing.T) {
	fc := newClock()
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, http.StatusServiceUnavailable, "down"), nil
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithMaxAttempts(1),
		transport.WithMaxHosts(2),
		transport.WithCircuitBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: 10 * time.Second}))
	get := func(url string) error {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, u := range []string{"http://a.test/", "http://b.test/"} {
		if err := get(u); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
	fc.Advance(time.Second)
	for i := 0; i < 2; i++ {
		if err := get("http://c.test/"); err != nil {
			t.Fatalf("new host with every breaker open: %v, want it served", err)
		}
	}
	if got := tr.UntrackedAdmissions(); got != 2 {
		t.Errorf("UntrackedAdmissions() = %d, want 2", got)
	}
	for _, u := range []string{"http://a.test/", "http://b.test/"} {
		if err := get(u); !errors.Is(err, transport.ErrCircuitOpen) {
			t.Fatalf("%s within its OpenDuration: %v, want ErrCircuitOpen", u, err)
		}
	}
	if got := tr.BreakerState("c.test"); got != resilience.BreakerClosed {
		t.Errorf("BreakerState(c.test) = %v, want closed (untracked)", got)
	}
}
