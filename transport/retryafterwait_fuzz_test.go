package transport_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// FuzzRetryAfterWait sends one request through the transport to an in-memory
// base that answers the first attempt with 429, 503 or 502 and arbitrary
// Retry-After bytes, and the second with 200, on a fake clock. Whatever the
// header says, the wait the transport schedules (OnRetry's Delay, slept in
// OnBackoff) is never negative, never above WithMaxRetryAfter when it came
// from the header, and ends before the request's deadline (a retry at the
// deadline would start with the context ended); a 502's
// header is ignored; when the transport does not wait it returns the first
// response and says why.
func FuzzRetryAfterWait(f *testing.F) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	seeds := []struct {
		header                       string
		status                       uint8
		maxRAms, deadlineMs, backoff int64
	}{
		{"5", 0, 30_000, 0, 2},
		{"5", 1, 30_000, 4_000, 2},
		{"5", 2, 30_000, 0, 2},
		{"30", 0, 30_000, 0, 0},
		{"31", 0, 30_000, 0, 0},
		{"0", 1, 0, 1, 5},
		{start.Add(7 * time.Second).Format(http.TimeFormat), 0, 10_000, 7_000, 1},
		{start.Add(-time.Hour).Format(http.TimeFormat), 1, 1_000, 0, 1},
		{"99999999999999999999", 0, 3_600_000, 0, 1},
		{"-1", 0, 1_000, 0, 250},
		{"\x00\xff", 1, 1_000, 100, 250},
	}
	for _, s := range seeds {
		f.Add(s.header, s.status, s.maxRAms, s.deadlineMs, s.backoff)
	}
	f.Fuzz(func(t *testing.T, header string, statusSel uint8, maxRAms, deadlineMs, backoffMs int64) {
		status := [...]int{429, 503, 502}[int(statusSel)%3]
		maxRA := time.Duration(absMod(maxRAms, 3_600_001)) * time.Millisecond
		backoff := time.Duration(absMod(backoffMs, 60_001)) * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		var deadline time.Time
		if deadlineMs > 0 {
			// The fake clock starts in 2030, so this deadline never fires
			// on the real clock; the transport compares it with fake time.
			deadline = start.Add(time.Duration(deadlineMs%3_600_001) * time.Millisecond)
			ctx, cancel = context.WithDeadline(context.Background(), deadline)
		}
		defer cancel()

		fc := fakeclock.New(start)
		var calls atomic.Int32
		base := baseFunc(func(r *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				return memResponse(r, status, "first", "Retry-After", header), nil
			}
			return memResponse(r, http.StatusOK, "second"), nil
		})
		type retry struct {
			ev resilience.RetryEvent
			at time.Time
		}
		retries := make(chan retry, 4)
		var sleeps, ends atomic.Int32
		var end resilience.CallEndEvent
		tr := transport.New(base, transport.WithClock(fc), transport.WithMaxAttempts(2),
			transport.WithRetryBudget(0, 0), transport.WithBackoff(resilience.Constant(backoff)),
			transport.WithMaxRetryAfter(maxRA),
			transport.WithHooks(transport.Hooks{
				OnRetry: func(e resilience.RetryEvent) { retries <- retry{e, fc.Now()} },
				OnBackoff: func(e resilience.BackoffEvent) {
					sleeps.Add(1)
					if e.Interrupted || e.Slept != e.Delay {
						t.Errorf("backoff %+v: interrupted or slept a different time than planned", e)
					}
				},
				OnCallEnd: func(e resilience.CallEndEvent) { ends.Add(1); end = e },
			}))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://fuzz.test/", nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan fuzzResult, 1)
		go func() {
			resp, err := tr.RoundTrip(req)
			done <- fuzzResult{resp, err}
		}()

		var got []retry
		var res fuzzResult
	drive:
		for {
			select {
			case res = <-done:
				break drive
			case r := <-retries:
				got = append(got, r)
				if r.ev.Delay > 0 {
					if !fc.WaitForTimers(1, 10*time.Second) {
						t.Fatalf("no sleep armed for a retry in %v", r.ev.Delay)
					}
					fc.Advance(r.ev.Delay)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("RoundTrip did not return")
			}
		}
		// OnRetry runs on the RoundTrip goroutine, so every event is queued
		// by now; one without a sleep may still be unread.
		for len(retries) > 0 {
			got = append(got, <-retries)
		}
		if res.err != nil || res.resp == nil {
			t.Fatalf("RoundTrip = %v, %v; an in-memory base that always answers must yield a response", res.resp, res.err)
		}
		body, _ := io.ReadAll(res.resp.Body)
		res.resp.Body.Close()

		if n := int(calls.Load()); n != 1+len(got) {
			t.Fatalf("base saw %d attempts, OnRetry fired %d times", n, len(got))
		}
		if ends.Load() != 1 {
			t.Fatalf("OnCallEnd fired %d times", ends.Load())
		}
		for _, r := range got {
			d := r.ev.Delay
			switch {
			case d < 0:
				t.Fatalf("negative wait %v (header %q)", d, header)
			case r.ev.FromRetryAfter && d > maxRA:
				t.Fatalf("waited %v from Retry-After %q, cap %v", d, header, maxRA)
			case r.ev.FromRetryAfter && status == http.StatusBadGateway:
				t.Fatalf("a 502's Retry-After %q was honoured", header)
			case !r.ev.FromRetryAfter && d != backoff:
				t.Fatalf("wait %v not from Retry-After, want the backoff %v", d, backoff)
			case !deadline.IsZero() && !r.at.Add(d).Before(deadline):
				t.Fatalf("wait of %v from %v ends at or past the deadline %v", d, r.at, deadline)
			}
			if want := start.Add(d); fc.Now() != want {
				t.Fatalf("fake clock at %v after the retry, want %v", fc.Now(), want)
			}
		}
		positive := 0
		for _, r := range got {
			if r.ev.Delay > 0 {
				positive++
			}
		}
		if int(sleeps.Load()) != positive {
			t.Fatalf("%d backoff sleeps for retries %+v", sleeps.Load(), got)
		}
		if len(got) == 0 {
			if res.resp.StatusCode != status || string(body) != "first" {
				t.Fatalf("no retry, yet returned %d %q instead of the first response", res.resp.StatusCode, body)
			}
			if end.Reason != resilience.ReasonRetryAfterTooLong && end.Reason != resilience.ReasonPastDeadline {
				t.Fatalf("no retry with reason %v", end.Reason)
			}
			if end.Reason == resilience.ReasonRetryAfterTooLong && status == http.StatusBadGateway {
				t.Fatalf("a 502's Retry-After stopped the request")
			}
		} else if res.resp.StatusCode != http.StatusOK || string(body) != "second" {
			t.Fatalf("after a retry got %d %q, want the second attempt's 200", res.resp.StatusCode, body)
		}

		// An exact oracle for small whole-second values.
		if secs, err := strconv.Atoi(strings.TrimSpace(header)); err == nil && secs >= 0 && secs < 1e6 &&
			strings.Trim(strings.TrimSpace(header), "0123456789") == "" && status != http.StatusBadGateway {
			want := time.Duration(secs) * time.Second
			fits := deadline.IsZero() || start.Add(want).Before(deadline)
			switch {
			case want <= maxRA && fits:
				if len(got) != 1 || got[0].ev.Delay != want || !got[0].ev.FromRetryAfter {
					t.Fatalf("Retry-After %q (cap %v, deadline %v): retries %+v, want one wait of %v", header, maxRA, deadline, got, want)
				}
			case want > maxRA:
				if len(got) != 0 || end.Reason != resilience.ReasonRetryAfterTooLong {
					t.Fatalf("Retry-After %q over cap %v: retries %+v, reason %v", header, maxRA, got, end.Reason)
				}
			default:
				if len(got) != 0 || end.Reason != resilience.ReasonPastDeadline {
					t.Fatalf("Retry-After %q past deadline %v: retries %+v, reason %v", header, deadline, got, end.Reason)
				}
			}
		}
	})
}

type fuzzResult struct {
	resp *http.Response
	err  error
}

// absMod maps any int64 into [0, m).
func absMod(v, m int64) int64 {
	v %= m
	if v < 0 {
		v += m
	}
	return v
}
