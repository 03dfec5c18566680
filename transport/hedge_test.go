package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

const hedgeDelay = 100 * time.Millisecond

func TestHedgeLaunchesAfterDelayAndFirstFinalResultWins(t *testing.T) {
	tests := []struct {
		name   string
		winner int
	}{
		{"200 wins", 200},
		{"404 wins", 404},
		{"500 wins", 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			gone := make(chan int, 1)
			s := newScript(t, hang(gone), reply(tc.winner))
			var hedges events[resilience.HedgeEvent]
			var end events[resilience.CallEndEvent]
			tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithHedging(hedgeDelay, 1),
				transport.WithHooks(transport.Hooks{OnHedge: hedges.add, OnCallEnd: end.add}))
			req := newRequest(t, testCtx(t), http.MethodGet, s.URL, nil)
			done := goRoundTrip(tr, req)
			recv(t, s.arrived, "attempt 1")
			waitArmed(t, fc, 1)
			fc.Advance(hedgeDelay - 1)
			if got := fc.Pending(); got != 1 {
				t.Fatalf("%d timers pending just before the hedge delay, want the hedge timer", got)
			}
			fc.Advance(1)
			recv(t, s.arrived, "the hedge")
			r := recv(t, done, "RoundTrip")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.resp.StatusCode != tc.winner {
				t.Errorf("status %d, want the hedge's %d", r.resp.StatusCode, tc.winner)
			}
			if body := readBody(t, r.resp); body != fmt.Sprintf("reply %d", tc.winner) {
				t.Errorf("body %q", body)
			}
			recv(t, gone, "the slow attempt to be cancelled")
			if h := hedges.get(); len(h) != 1 || h[0].Attempt != 2 || h[0].InFlight != 2 || transport.RequestOf(h[0].Event) != req {
				t.Errorf("OnHedge %+v, want attempt 2 with 2 in flight", h)
			}
			if e := end.get(); len(e) != 1 || e[0].Attempts != 2 || e[0].Hedges != 1 || e[0].Retries != 0 {
				t.Errorf("OnCallEnd %+v, want 2 attempts, 1 hedge", e)
			}
		})
	}
}

// TestHedgeLoserIsCancelledThenClosed: a loser is cancelled first and its
// body closed unread; nothing waits on a response nobody will use. The loser
// here is the first attempt, which runs on the caller's goroutine: it
// returns when cancelled, as a RoundTripper does, but with a response it
// had already received.
func TestHedgeLoserIsCancelledThenClosed(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		size     int
		wantRead int64
	}{
		{"small 200 loser", 200, 100, 0},
		{"small retryable loser", 503, 100, 0},
		{"large loser", 200, 1 << 20, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			loserCtx := make(chan context.Context, 1)
			loserBody := make(chan *watchedBody, 1)
			var n atomic.Int32
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				if n.Add(1) == 1 {
					loserCtx <- r.Context()
					<-r.Context().Done() // cancelled, it answers anyway: its response arrived first
					resp := fakeResponse(r, tc.status, strings.Repeat("l", tc.size))
					wb := watch(resp.Body)
					resp.Body = wb
					loserBody <- wb
					return resp, nil
				}
				return fakeResponse(r, 200, "winner"), nil
			})
			ended := make(chan resilience.AttemptEndEvent, 4)
			tr := transport.New(base, transport.WithClock(fc), transport.WithHedging(hedgeDelay, 1),
				transport.WithHooks(transport.Hooks{OnAttemptEnd: func(e resilience.AttemptEndEvent) { ended <- e }}))
			done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
			ctx := recv(t, loserCtx, "attempt 1")
			waitArmed(t, fc, 1)
			fc.Advance(hedgeDelay)
			r := recv(t, done, "RoundTrip")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if body := readBody(t, r.resp); body != "winner" {
				t.Errorf("body %q, want the winner's", body)
			}
			if ctx.Err() == nil {
				t.Errorf("loser's context not cancelled when RoundTrip returned")
			}
			wb := recv(t, loserBody, "the loser's response")
			select {
			case <-wb.closed:
			case <-time.After(wait):
				t.Fatal("loser's body never closed")
			}
			if got := wb.read.Load(); got != tc.wantRead {
				t.Errorf("loser's body read %d bytes, want %d", got, tc.wantRead)
			}
			var outcomes []resilience.AttemptOutcome
			for range 2 {
				e := recv(t, ended, "OnAttemptEnd")
				outcomes = append(outcomes, e.Outcome)
			}
			if outcomes[0] != resilience.AttemptSuccess || outcomes[1] != resilience.AttemptCancelled {
				t.Errorf("outcomes %v, want [success cancelled]", outcomes)
			}
		})
	}
}

func TestHedgesAndRetriesNeverExceedMaxAttempts(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts int
		maxHedges   int
	}{
		{"hedges fill MaxAttempts", 3, 2},
		{"MaxAttempts caps hedges", 2, 5},
		{"retries after hedges", 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			release := make(chan struct{})
			s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				reply(503)(w, r)
			})
			var end events[resilience.CallEndEvent]
			tr := transport.New(newBase(t), noDelay, transport.WithClock(fc),
				transport.WithMaxAttempts(tc.maxAttempts), transport.WithHedging(hedgeDelay, tc.maxHedges),
				transport.WithRetryBudget(0, 0), transport.WithHooks(transport.Hooks{OnCallEnd: end.add}))
			done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
			recv(t, s.arrived, "attempt 1")
			hedged := min(tc.maxHedges, tc.maxAttempts-1)
			for i := 1; i <= hedged; i++ {
				waitArmed(t, fc, i)
				fc.Advance(hedgeDelay)
				recv(t, s.arrived, "a hedge")
			}
			close(release)
			r := recv(t, done, "RoundTrip")
			if r.err != nil {
				t.Fatal(r.err)
			}
			readBody(t, r.resp)
			if r.resp.StatusCode != 503 {
				t.Errorf("status %d, want the last 503", r.resp.StatusCode)
			}
			if got := s.count(); got != tc.maxAttempts {
				t.Errorf("server saw %d attempts, want MaxAttempts = %d", got, tc.maxAttempts)
			}
			if e := end.get(); len(e) != 1 || e[0].Attempts != tc.maxAttempts || e[0].Hedges != hedged ||
				e[0].Reason != resilience.ReasonAttemptsExhausted {
				t.Errorf("OnCallEnd %+v, want %d attempts, %d hedges, attempts_exhausted", e, tc.maxAttempts, hedged)
			}
		})
	}
}

func TestHedgingIsOffForSomeRequests(t *testing.T) {
	upgrade := func(r *http.Request) { r.Header.Set("Upgrade", "websocket") }
	none := func(*http.Request) {}
	tests := []struct {
		name     string
		opts     []transport.Option
		policy   transport.Policy
		prepare  func(*http.Request)
		wantHits int
	}{
		{"Upgrade header, still retried", []transport.Option{transport.WithHedging(hedgeDelay, 2)}, transport.Policy{}, upgrade, 2},
		{"Policy MaxHedges -1, still retried", []transport.Option{transport.WithHedging(hedgeDelay, 2)},
			transport.Policy{MaxHedges: -1}, none, 2},
		{"NoRetry", []transport.Option{transport.WithHedging(hedgeDelay, 2)}, transport.NoRetry(), none, 1},
		{"zero delay", []transport.Option{transport.WithHedging(0, 2)}, transport.Policy{}, none, 2},
		{"zero hedges", []transport.Option{transport.WithHedging(hedgeDelay, 0)}, transport.Policy{}, none, 2},
		{"not idempotent", []transport.Option{transport.WithHedging(hedgeDelay, 2)}, transport.Policy{},
			func(r *http.Request) { r.Method = http.MethodPost }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			s := newScript(t, reply(503), reply(200))
			var hedges events[resilience.HedgeEvent]
			opts := append([]transport.Option{noDelay, transport.WithClock(fc),
				transport.WithHooks(transport.Hooks{OnHedge: hedges.add})}, tc.opts...)
			tr := transport.New(newBase(t), opts...)
			req := newRequest(t, transport.WithPolicy(context.Background(), tc.policy), http.MethodGet, s.URL, nil)
			tc.prepare(req)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := fc.Armed(); got != 0 {
				t.Errorf("%d hedge timers armed, want none", got)
			}
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
			if h := hedges.get(); len(h) != 0 {
				t.Errorf("OnHedge fired: %+v", h)
			}
		})
	}
}

// TestRetryableResultWhileAnotherInFlightRetriesAtOnce pins that a retry
// replacing a failed hedge does not wait for the backoff.
func TestRetryableResultWhileAnotherInFlightRetriesAtOnce(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, hang(gone), reply(503), reply(200))
	var retries events[resilience.RetryEvent]
	var sleeps events[resilience.BackoffEvent]
	tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithBackoff(resilience.Constant(time.Hour)),
		transport.WithHedging(hedgeDelay, 1),
		transport.WithHooks(transport.Hooks{OnRetry: retries.add, OnBackoff: sleeps.add}))
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	waitArmed(t, fc, 1)
	fc.Advance(hedgeDelay)
	recv(t, s.arrived, "the hedge")
	recv(t, s.arrived, "the immediate retry")
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := readBody(t, r.resp); body != "reply 200" {
		t.Errorf("body %q, want the retry's", body)
	}
	recv(t, gone, "the slow attempt to be cancelled")
	if ev := retries.get(); len(ev) != 1 || ev[0].Attempt != 2 || ev[0].Delay != 0 || ev[0].Code != 503 {
		t.Errorf("OnRetry %+v, want attempt 2's 503 retried with Delay 0", ev)
	}
	if sl := sleeps.get(); len(sl) != 0 {
		t.Errorf("OnBackoff fired: %+v", sl)
	}
	if got := fc.Now().Sub(fakeStart); got != hedgeDelay {
		t.Errorf("fake time advanced %v, want only the hedge delay", got)
	}
}

func TestBackoffRetriesAreHedged(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 1)
	s := newScript(t, reply(503), hang(gone), reply(200))
	var hedges events[resilience.HedgeEvent]
	var end events[resilience.CallEndEvent]
	tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithBackoff(resilience.Constant(time.Second)),
		transport.WithHedging(hedgeDelay, 1),
		transport.WithHooks(transport.Hooks{OnHedge: hedges.add, OnCallEnd: end.add}))
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	waitArmed(t, fc, 2) // the hedge timer, then the backoff sleep
	fc.Advance(time.Second)
	recv(t, s.arrived, "the retry")
	waitArmed(t, fc, 3) // the hedge timer, re-armed for the retry
	fc.Advance(hedgeDelay)
	recv(t, s.arrived, "the retry's hedge")
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if body := readBody(t, r.resp); body != "reply 200" {
		t.Errorf("body %q, want the hedge's", body)
	}
	recv(t, gone, "the slow retry to be cancelled")
	if h := hedges.get(); len(h) != 1 || h[0].Attempt != 3 || h[0].InFlight != 2 {
		t.Errorf("OnHedge %+v, want one hedge, attempt 3, 2 in flight", h)
	}
	if e := end.get(); len(e) != 1 || e[0].Retries != 1 || e[0].Hedges != 1 || e[0].Backoff != time.Second {
		t.Errorf("OnCallEnd %+v, want 1 retry, 1 hedge, 1s of backoff", e)
	}
}

func TestHedgeWinnerBodyIsFullyReadableAfterLosersAreCancelled(t *testing.T) {
	fc := newClock()
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	gone := make(chan int, 1)
	s := newScript(t, hang(gone), func(w http.ResponseWriter, r *http.Request) {
		w.Write(want[:32<<10])
		http.NewResponseController(w).Flush()
		select { // hold the rest until the loser is gone
		case <-gone:
		case <-r.Context().Done():
			return
		}
		for off := 32 << 10; off < len(want); off += 16 << 10 {
			w.Write(want[off : off+16<<10])
			http.NewResponseController(w).Flush()
		}
	})
	tr := transport.New(newBase(t), transport.WithClock(fc), transport.WithHedging(hedgeDelay, 1))
	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	waitArmed(t, fc, 1)
	fc.Advance(hedgeDelay)
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	got, err := io.ReadAll(r.resp.Body)
	if err != nil {
		t.Fatalf("reading the winner's body after %d bytes: %v", len(got), err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("winner's body: %d bytes, want %d identical bytes", len(got), len(want))
	}
}

// TestArmedHedgingRunsOnTheCallersGoroutine: with hedging armed (and a
// per-attempt timeout and the breaker), a request answered within the hedge
// delay runs on the caller's goroutine: the base sees the test's own frame
// on its stack, so no goroutine was started for it.
func TestArmedHedgingRunsOnTheCallersGoroutine(t *testing.T) {
	var onCaller []bool
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		pc := make([]uintptr, 64)
		frames := runtime.CallersFrames(pc[:runtime.Callers(1, pc)])
		found := false
		for {
			f, more := frames.Next()
			found = found || strings.HasSuffix(f.Function, "TestArmedHedgingRunsOnTheCallersGoroutine")
			if !more {
				break
			}
		}
		onCaller = append(onCaller, found)
		if len(onCaller) == 1 {
			return fakeResponse(r, 503, "busy"), nil
		}
		return fakeResponse(r, 200, "ok"), nil
	})
	tr := transport.New(base, transport.WithHedging(time.Hour, 1), transport.WithPerAttemptTimeout(time.Hour),
		transport.WithBreaker(resilience.BreakerConfig{}), transport.WithBackoff(resilience.Constant(0)))
	resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); body != "ok" {
		t.Fatalf("body %q", body)
	}
	if len(onCaller) != 2 || !onCaller[0] || !onCaller[1] {
		t.Errorf("attempts on the caller's goroutine: %v, want [true true]", onCaller)
	}
}
