package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

func httpDate(d time.Duration) string { return fakeStart.Add(d).Format(http.TimeFormat) }

func TestRetryAfterReplacesBackoffOn429And503(t *testing.T) {
	const backoff = 2 * time.Second
	tests := []struct {
		name       string
		opts       []transport.Option
		status     int
		retryAfter string
		wantDelay  time.Duration
		wantServer bool // the delay came from Retry-After
	}{
		{"429 seconds", nil, 429, "3", 3 * time.Second, true},
		{"503 seconds", nil, 503, "3", 3 * time.Second, true},
		{"429 HTTP date", nil, 429, httpDate(7 * time.Second), 7 * time.Second, true},
		{"503 HTTP date", nil, 503, httpDate(7 * time.Second), 7 * time.Second, true},
		{"503 seconds with spaces", nil, 503, " 4 ", 4 * time.Second, true},
		{"429 exactly MaxRetryAfter", []transport.Option{transport.WithMaxRetryAfter(10 * time.Second)}, 429, "10", 10 * time.Second, true},
		{"429 just under the default MaxRetryAfter", nil, 429, "29", 29 * time.Second, true},
		{"502 ignores Retry-After", nil, 502, "3", backoff, false},
		{"504 ignores Retry-After", nil, 504, "3", backoff, false},
		{"429 invalid value uses backoff", nil, 429, "soon", backoff, false},
		{"503 negative value uses backoff", nil, 503, "-5", backoff, false},
		{"503 fractional value uses backoff", nil, 503, "1.5", backoff, false},
		{"429 empty value uses backoff", nil, 429, "", backoff, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			s := newScript(t, reply(tc.status, "Retry-After", tc.retryAfter), reply(200))
			var retries events[resilience.RetryEvent]
			var sleeps events[resilience.BackoffEvent]
			opts := append([]transport.Option{
				transport.WithClock(fc),
				transport.WithBackoff(resilience.Constant(backoff)),
				transport.WithHooks(transport.Hooks{OnRetry: retries.add, OnBackoff: sleeps.add}),
			}, tc.opts...)
			tr := transport.New(newBase(t), opts...)
			done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
			waitArmed(t, fc, 1)
			fc.Advance(tc.wantDelay)
			r := recv(t, done, "RoundTrip to finish after the expected sleep")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if body := readBody(t, r.resp); body != "reply 200" {
				t.Errorf("body %q, want the retry's", body)
			}
			if got := s.count(); got != 2 {
				t.Errorf("server saw %d attempts, want 2", got)
			}
			ev := retries.get()
			if len(ev) != 1 || ev[0].Delay != tc.wantDelay || ev[0].FromRetryAfter != tc.wantServer || ev[0].Code != tc.status {
				t.Errorf("OnRetry %+v, want one event with Delay %v, RetryAfter %v, StatusCode %d", ev, tc.wantDelay, tc.wantServer, tc.status)
			}
			sl := sleeps.get()
			if len(sl) != 1 || sl[0].Delay != tc.wantDelay || sl[0].Slept != tc.wantDelay || sl[0].FromRetryAfter != tc.wantServer {
				t.Errorf("OnBackoff %+v, want one sleep of exactly %v", sl, tc.wantDelay)
			}
			if got := fc.Now().Sub(fakeStart); got != tc.wantDelay {
				t.Errorf("fake time advanced %v, want %v", got, tc.wantDelay)
			}
		})
	}
}

func TestRetryAfterNowRetriesWithoutSleeping(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
	}{
		{"zero seconds", "0"},
		{"HTTP date in the past", httpDate(-time.Minute)},
		{"HTTP date now", httpDate(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			s := newScript(t, reply(503, "Retry-After", tc.retryAfter), reply(200))
			var retries events[resilience.RetryEvent]
			tr := transport.New(newBase(t), transport.WithClock(fc),
				transport.WithBackoff(resilience.Constant(time.Hour)),
				transport.WithHooks(transport.Hooks{OnRetry: retries.add}))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if body := readBody(t, resp); body != "reply 200" {
				t.Errorf("body %q, want the retry's", body)
			}
			if ev := retries.get(); len(ev) != 1 || ev[0].Delay != 0 || !ev[0].FromRetryAfter {
				t.Errorf("OnRetry %+v, want Delay 0 from Retry-After", ev)
			}
		})
	}
}

func TestRetryAfterBeyondLimitReturnsTheResponse(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	noDeadline := func(time.Time) (context.Context, context.CancelFunc) {
		return context.WithCancel(context.Background())
	}
	deadlineIn := func(d time.Duration) func(time.Time) (context.Context, context.CancelFunc) {
		return func(now time.Time) (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), now.Add(d))
		}
	}
	tests := []struct {
		name       string
		opts       []transport.Option
		ctx        func(time.Time) (context.Context, context.CancelFunc)
		status     int
		retryAfter string
		wantReason resilience.EndReason
	}{
		{"429 over MaxRetryAfter", []transport.Option{transport.WithMaxRetryAfter(10 * time.Second)}, noDeadline,
			429, "11", resilience.ReasonRetryAfterTooLong},
		{"503 over the default 30s", nil, noDeadline, 503, "31", resilience.ReasonRetryAfterTooLong},
		{"503 HTTP date over MaxRetryAfter", []transport.Option{transport.WithMaxRetryAfter(10 * time.Second)}, noDeadline,
			503, start.Add(20 * time.Second).Format(http.TimeFormat), resilience.ReasonRetryAfterTooLong},
		{"429 absurdly large", nil, noDeadline, 429, "99999999999999999999999", resilience.ReasonRetryAfterTooLong},
		{"MaxRetryAfter 0 refuses any wait", []transport.Option{transport.WithMaxRetryAfter(0)}, noDeadline,
			429, "1", resilience.ReasonRetryAfterTooLong},
		{"429 past the context deadline", nil, deadlineIn(10 * time.Second), 429, "20", resilience.ReasonPastDeadline},
		{"503 past the context deadline", []transport.Option{transport.WithMaxRetryAfter(3 * time.Hour)}, deadlineIn(time.Hour),
			503, "7200", resilience.ReasonPastDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeclock.New(start)
			s := newScript(t, reply(tc.status, "Retry-After", tc.retryAfter), reply(200))
			var retries events[resilience.RetryEvent]
			var end events[resilience.CallEndEvent]
			opts := append([]transport.Option{
				noDelay, transport.WithClock(fc),
				transport.WithHooks(transport.Hooks{OnRetry: retries.add, OnCallEnd: end.add}),
			}, tc.opts...)
			tr := transport.New(newBase(t), opts...)
			ctx, cancel := tc.ctx(start)
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatalf("err = %v, want the %d response", err, tc.status)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if body := readBody(t, resp); body != fmt.Sprintf("reply %d", tc.status) {
				t.Errorf("body %q, want it readable", body)
			}
			if got := s.count(); got != 1 {
				t.Errorf("server saw %d attempts, want 1", got)
			}
			if ev := retries.get(); len(ev) != 0 {
				t.Errorf("OnRetry fired: %+v", ev)
			}
			if ev := end.get(); len(ev) != 1 || ev[0].Reason != tc.wantReason || ev[0].Code != tc.status {
				t.Errorf("OnCallEnd %+v, want reason %v", ev, tc.wantReason)
			}
		})
	}
}
