package transport_test

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// get503 sends one GET and returns the response status, failing on error.
func getStatus(t *testing.T, tr *transport.Transport, url string) int {
	t.Helper()
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	return resp.StatusCode
}

// TestBudgetReserveRefusesRetriesUntilASuccess: a reserve of one pays one
// retry, and time alone does not refill it: a quiet client in an outage
// spends it once, not every second.
func TestBudgetReserveRefusesRetriesUntilASuccess(t *testing.T) {
	fc := newClock()
	s := newScript(t, reply(503))
	var end events[resilience.CallEndEvent]
	var refused events[resilience.BudgetEvent]
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithRetryBudget(0, 1),
		transport.WithHooks(transport.Hooks{OnCallEnd: end.add, OnBudgetExhausted: refused.add}))

	if got := getStatus(t, tr, s.URL); got != 503 {
		t.Errorf("status %d, want the retained 503", got)
	}
	if got := s.count(); got != 2 {
		t.Errorf("server saw %d attempts, want 2 (a reserve of one retry)", got)
	}
	ev := end.get()
	if len(ev) != 1 || ev[0].Reason != resilience.ReasonBudgetExhausted || ev[0].Reason.String() != "budget_exhausted" {
		t.Errorf("OnCallEnd %+v, want reason budget_exhausted", ev)
	}
	if rf := refused.get(); len(rf) != 1 || rf[0].Attempt != 3 || rf[0].Kind != resilience.KindRetry {
		t.Errorf("OnBudgetExhausted %+v, want attempt 3 of kind retry", rf)
	}

	fc.Advance(time.Second)
	getStatus(t, tr, s.URL)
	if got := s.count(); got != 3 {
		t.Errorf("server saw %d attempts in total, want 3 (a new second refills nothing)", got)
	}
}

func TestBudgetDisabledAllowsEveryRetry(t *testing.T) {
	fc := newClock()
	s := newScript(t, reply(503))
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithRetryBudget(0, 0))
	for range 20 {
		getStatus(t, tr, s.URL)
	}
	if got := s.count(); got != 60 {
		t.Errorf("server saw %d attempts, want 60", got)
	}
	if got := tr.Stats().BudgetTokens; !math.IsInf(got, 1) {
		t.Errorf("Stats().BudgetTokens = %v, want +Inf", got)
	}
}

// TestDefaultBudget pins the default: a ratio of 0.25 and a reserve of 2
// retries, the reserve paying first, a retry that fails keeping its token.
// In a total outage only the reserve pays; requests that succeeded earlier
// fund retries from deposits only until the failed retries outnumber
// twice the successful ones plus the reserve.
func TestDefaultBudget(t *testing.T) {
	tests := []struct {
		name       string
		successes  int
		wantFailed int32
		wantTokens float64
	}{
		// 15 failing requests, 2 retries from the reserve.
		{"a total outage: the reserve only", 0, 15 + 2, 0},
		// 40 successes deposit 10. The reserve pays 2 retries; both fail
		// (2 ≤ 2 × 0 + 2: the deposits still pay); the deposits pay a
		// third, which fails too (3 > 2): no more. 10 less 1 spent: 9.
		{"successes earlier fund retries until retries fail", 40, 15 + 3, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			var failed atomic.Int32
			base := failingOn("/fail", &failed)
			tr := transport.New(base, noDelay, transport.WithClock(fc), transport.WithMaxAttempts(2))
			for range tc.successes {
				getStatus(t, tr, "http://svc.test/ok")
			}
			for range 15 {
				getStatus(t, tr, "http://svc.test/fail")
			}
			if got := failed.Load(); got != tc.wantFailed {
				t.Errorf("failing server saw %d attempts, want %d", got, tc.wantFailed)
			}
			if got := tr.Stats().BudgetTokens; math.Abs(got-tc.wantTokens) > 1e-9 {
				t.Errorf("Stats().BudgetTokens = %v, want %v", got, tc.wantTokens)
			}
		})
	}
}

func TestBudgetDepositsExpireAfterTenSeconds(t *testing.T) {
	tests := []struct {
		name       string
		after      time.Duration
		wantTokens float64
	}{
		{"deposits within the window", time.Second, 1},
		{"deposits near the end of the window still count", 9 * time.Second, 1},
		{"deposits older than the window are gone", 11 * time.Second, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			var failed atomic.Int32
			tr := transport.New(failingOn("/fail", &failed), noDelay, transport.WithClock(fc), transport.WithRetryBudget(0.5, 0))
			getStatus(t, tr, "http://svc.test/ok")
			getStatus(t, tr, "http://svc.test/ok")
			fc.Advance(tc.after)
			if got := tr.Stats().BudgetTokens; got != tc.wantTokens {
				t.Errorf("Stats().BudgetTokens = %v, want %v", got, tc.wantTokens)
			}
		})
	}
	t.Run("a retry paid by the last second's deposits", func(t *testing.T) {
		fc := newClock()
		var failed atomic.Int32
		tr := transport.New(failingOn("/fail", &failed), noDelay, transport.WithClock(fc), transport.WithRetryBudget(0.5, 0))
		getStatus(t, tr, "http://svc.test/ok")
		getStatus(t, tr, "http://svc.test/ok")
		getStatus(t, tr, "http://svc.test/fail")
		if got := failed.Load(); got != 2 {
			t.Errorf("failing request made %d attempts, want 2", got)
		}
	})
}

func TestBudgetTokensAreSpentOnlyWhenAnAttemptLaunches(t *testing.T) {
	fc := newClock()
	var fail atomic.Bool
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if fail.Load() {
			return fakeResponse(r, 503, "down"), nil
		}
		return fakeResponse(r, 200, "ok"), nil
	})
	tr := transport.New(base, noDelay, transport.WithClock(fc), transport.WithRetryBudget(0, 3), transport.WithMaxAttempts(2))
	if got := tr.Stats().BudgetTokens; got != 3 {
		t.Fatalf("Stats().BudgetTokens = %v before any request, want 3", got)
	}
	getStatus(t, tr, "http://svc.test/")
	if got := tr.Stats().BudgetTokens; got != 3 {
		t.Errorf("Stats().BudgetTokens = %v after a success, want 3", got)
	}
	fail.Store(true)
	getStatus(t, tr, "http://svc.test/")
	if got := tr.Stats().BudgetTokens; got != 2 {
		t.Errorf("Stats().BudgetTokens = %v after one retry (then attempts exhausted), want 2", got)
	}
	fc.Advance(time.Second)
	if got := tr.Stats().BudgetTokens; got != 2 {
		t.Errorf("Stats().BudgetTokens = %v in the next second, want 2 (time refills nothing)", got)
	}
	fail.Store(false)
	getStatus(t, tr, "http://svc.test/")
	if got := tr.Stats().BudgetTokens; got != 3 {
		t.Errorf("Stats().BudgetTokens = %v after a success, want 3", got)
	}
}

func TestBudgetRatioDeposits(t *testing.T) {
	fc := newClock()
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) { return fakeResponse(r, 200, "ok"), nil })
	tr := transport.New(base, transport.WithClock(fc), transport.WithRetryBudget(0.5, 0))
	for range 4 {
		getStatus(t, tr, "http://svc.test/")
	}
	if got := tr.Stats().BudgetTokens; got != 2 {
		t.Errorf("Stats().BudgetTokens = %v after 4 requests at ratio 0.5, want 2", got)
	}
}

func TestEmptyBudgetRefusesHedgeButLetsTheAttemptInFlightFinish(t *testing.T) {
	fc := newClock()
	release := make(chan struct{})
	s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		reply(200)(w, r)
	})
	refused := make(chan resilience.BudgetEvent, 4)
	var end events[resilience.CallEndEvent]
	tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithRetryBudget(0.01, 0),
		transport.WithHedging(time.Second, 2),
		transport.WithHooks(transport.Hooks{
			OnBudgetExhausted: func(e resilience.BudgetEvent) { refused <- e },
			OnCallEnd:         end.add,
		}))
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	waitArmed(t, fc, 1)
	fc.Advance(time.Second)
	if e := recv(t, refused, "the budget to refuse the hedge"); e.Kind != resilience.KindHedge || e.Attempt != 2 {
		t.Errorf("OnBudgetExhausted %+v, want attempt 2 of kind hedge", e)
	}
	close(release)
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := readBody(t, r.resp); body != "reply 200" {
		t.Errorf("body %q, want the in-flight attempt's", body)
	}
	if got := s.count(); got != 1 {
		t.Errorf("server saw %d attempts, want 1", got)
	}
	if ev := end.get(); len(ev) != 1 || ev[0].Hedges != 0 || ev[0].Reason != resilience.ReasonSuccess {
		t.Errorf("OnCallEnd %+v, want success without hedges", ev)
	}
}

// failingOn is a base answering 503 to path (counting those attempts in
// failed) and 200 to every other.
func failingOn(path string, failed *atomic.Int32) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == path {
			failed.Add(1)
			return fakeResponse(r, 503, "down"), nil
		}
		return fakeResponse(r, 200, "ok"), nil
	})
}

// TestBudgetReserveRefilledByAnswersNotByOverload: a success refills the
// reserve, one retry a second; an answer that says the server is
// overloaded (a 503 the caller does not retry, here for its pushback) does
// not, though it ends the call without a retryable result.
func TestBudgetReserveRefilledByAnswersNotByOverload(t *testing.T) {
	fc := newClock()
	var attempts atomic.Int32
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		switch r.URL.Path {
		case "/ok":
			return fakeResponse(r, 200, "ok"), nil
		case "/pushed":
			return fakeResponse(r, 503, "down", transport.PushbackHeader, transport.PushbackRetried), nil
		}
		return fakeResponse(r, 503, "down"), nil
	})
	tr := transport.New(base, noDelay, transport.WithClock(fc), transport.WithRetryBudget(0, 1), transport.WithMaxAttempts(2))
	tries := func(path string) int32 {
		attempts.Store(0)
		getStatus(t, tr, "http://svc.test"+path)
		return attempts.Load()
	}
	steps := []struct {
		path string
		want int32
	}{
		{"/fail", 2},   // the reserve pays the retry
		{"/pushed", 1}, // not retried, and no refill
		{"/fail", 1},   // so nothing left
		{"/ok", 1},     // a success refills one
		{"/fail", 2},
	}
	for i, s := range steps {
		fc.Advance(time.Second)
		if got := tries(s.path); got != s.want {
			t.Fatalf("step %d, %s: %d attempts, want %d", i+1, s.path, got, s.want)
		}
	}
}
