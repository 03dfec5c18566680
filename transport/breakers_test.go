package transport_test

import (
	"context"
	"errors"
	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
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
		transport.WithMaxKeys(2),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: 10 * time.Second}))
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
	if got := tr.Stats().UntrackedAdmissions; got != 2 {
		t.Errorf("Stats().UntrackedAdmissions = %d, want 2", got)
	}
	for _, u := range []string{"http://a.test/", "http://b.test/"} {
		if err := get(u); !errors.Is(err, transport.ErrCircuitOpen) {
			t.Fatalf("%s within its OpenDuration: %v, want ErrCircuitOpen", u, err)
		}
	}
	if got := breakerState(tr, "c.test"); got != resilience.BreakerClosed {
		t.Errorf("c.test's breaker = %v, want closed (untracked)", got)
	}
}

// TestUntrackedAdmissionsCountsRequests: a request served untracked counts
// once, however many attempts it makes (issue 25, item 5).
func TestUntrackedAdmissionsCountsRequests(t *testing.T) {
	fc := newClock()
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, http.StatusServiceUnavailable, "down"), nil
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithMaxKeys(1), noDelay,
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: 10 * time.Second}))
	get := func(url string) {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
		if err == nil {
			resp.Body.Close()
		}
	}
	get("http://a.test/") // opens a's breaker: the table is pinned
	get("http://b.test/") // untracked, three attempts
	if got := tr.Stats().UntrackedAdmissions; got != 1 {
		t.Errorf("UntrackedAdmissions = %d after one request of three attempts, want 1", got)
	}
}

// TestNewHostIsTrackedWhenTheOpenDurationEnds: a host served untracked
// because every tracked breaker is open is tracked again the moment the
// first OpenDuration has ended, not up to a second later (issue 25, item 6:
// the check compared a coarse second). Every decision of the table and the
// breakers reads the engine's clock exactly, so the fake clock drives it.
func TestNewHostIsTrackedWhenTheOpenDurationEnds(t *testing.T) {
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, http.StatusServiceUnavailable, "down"), nil
	})
	const open = 300 * time.Millisecond
	fc := fakeclock.New(time.Date(2030, 1, 2, 3, 4, 5, 400_000_000, time.UTC)) // mid-second: a coarse second would be wrong
	tr := transport.New(base, transport.WithMaxKeys(1), transport.WithMaxAttempts(1), transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1, OpenDuration: open}))
	get := func(url string) {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
		if err == nil {
			resp.Body.Close()
		}
	}
	get("http://a.test/") // a opens
	get("http://b.test/") // untracked: the only room is a's
	if got := tr.Stats().UntrackedAdmissions; got != 1 {
		t.Fatalf("within a's OpenDuration: UntrackedAdmissions = %d, want 1", got)
	}
	fc.Advance(open - time.Nanosecond)
	get("http://b.test/")
	if got := tr.Stats().UntrackedAdmissions; got != 2 {
		t.Fatalf("a nanosecond before a's OpenDuration ends: UntrackedAdmissions = %d, want 2", got)
	}
	fc.Advance(time.Nanosecond)
	get("http://b.test/")
	if got := tr.Stats().UntrackedAdmissions; got != 2 {
		t.Errorf("as a's OpenDuration ended: UntrackedAdmissions = %d, want still 2 (b tracked)", got)
	}
	if _, ok := tr.Stats().Host("b.test"); !ok {
		t.Error("b.test is not tracked once an OpenDuration ended")
	}
}
