package transport_test

// Regression tests for "an attempt ends when its result is known": nothing
// the transport keeps for later (a superseded response, a loser) holds a
// connection, a goroutine or the caller.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// retainBound is how long reading a superseded body may delay a retry (the
// transport's one-second retain limit) plus a generous margin for a loaded
// machine. A test that fails it would, before the fix, wait forever.
const retainBound = 6 * time.Second

// maxKeptErrors is the bound on resilience.Error.Errs the package doc documents.
const maxKeptErrors = 8

// countConns counts the connections a test server accepts.
func countConns(srv *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

// firstFails answers each request's first attempt (by its X-Request
// header) with a 503 and a body, and its retries with a 200, so the outcome
// does not depend on how concurrent requests interleave.
func firstFails() http.HandlerFunc {
	var seen sync.Map
	return func(w http.ResponseWriter, r *http.Request) {
		if _, again := seen.LoadOrStore(r.Header.Get("X-Request"), true); !again {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, strings.Repeat("busy ", 200))
			return
		}
		io.WriteString(w, "ok")
	}
}

// TestRetryDoesNotWaitForItsOwnConnection: a base limited to N connections
// per host, N requests in an outage. Each superseded 503 used to hold its
// connection through the retry, so every retry waited for a connection that
// only its own request could free: a deadlock until the deadline.
func TestRetryDoesNotWaitForItsOwnConnection(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("MaxConnsPerHost=%d", n), func(t *testing.T) {
			srv := httptest.NewServer(firstFails())
			defer srv.Close()
			base := &http.Transport{MaxConnsPerHost: n}
			defer base.CloseIdleConnections()
			tr := transport.New(base, noDelay, transport.WithRetryBudget(0, 0))
			ctx, cancel := context.WithTimeout(context.Background(), retainBound)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					req := newRequest(t, ctx, http.MethodGet, srv.URL, nil)
					req.Header.Set("X-Request", fmt.Sprint(i))
					resp, err := tr.RoundTrip(req)
					if err != nil {
						errs <- err
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || string(b) != "ok" {
						errs <- fmt.Errorf("got %d %q, want the retry's 200", resp.StatusCode, b)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// stalled503 answers its first request with a 503 whose body starts and then
// stalls until the test ends, and later ones with 200 "winner".
func stalled503(t *testing.T) *httptest.Server {
	stop := make(chan struct{})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "partial ")
			w.(http.Flusher).Flush()
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "winner")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: lets the handler return
	return srv
}

// TestStalledSupersededBodyDoesNotHoldTheWinner: attempt 1's 503 body
// stalls; attempt 2's 200 must come back without waiting for it.
func TestStalledSupersededBodyDoesNotHoldTheWinner(t *testing.T) {
	tests := []struct {
		name string
		opts []transport.Option
	}{
		{"retry", []transport.Option{noDelay}},
		{"hedge", []transport.Option{noDelay, transport.WithHedging(20*time.Millisecond, 1)}},
		{"per-attempt timeout", []transport.Option{noDelay, transport.WithPerAttemptTimeout(time.Minute)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := stalled503(t)
			base := newBase(t)
			tr := transport.New(base, tc.opts...)
			done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
			select {
			case r := <-done:
				if r.err != nil {
					t.Fatal(r.err)
				}
				if body := readBody(t, r.resp); body != "winner" {
					t.Errorf("body %q, want the winner's", body)
				}
			case <-time.After(retainBound):
				t.Fatal("RoundTrip waited on the superseded attempt's stalled body")
			}
		})
	}
}

// TestRetryReusesTheConnection: a superseded 503 is read and closed before
// the retry, so the retry reuses its connection. Before, every retry opened
// a new one (3 sequential attempts used 2 connections).
func TestRetryReusesTheConnection(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 { // every request: a 503, then a 200
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "try again")
			return
		}
		io.WriteString(w, "ok")
	}))
	conns := countConns(srv)
	srv.Start()
	defer srv.Close()
	tr := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
	const requests = 10
	for range requests {
		resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		if body := readBody(t, resp); body != "ok" {
			t.Fatalf("body %q", body)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d requests with one retry each opened %d connections, want 1", requests, got)
	}
}

// TestGiveUpReturnsTheRetainedResponse: the response returned on give-up is
// the retained one, with exactly the bytes kept; a longer body yields the
// kept prefix and then ErrBodyTruncated, never a silent EOF.
func TestGiveUpReturnsTheRetainedResponse(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name     string
		body     string
		limit    int64
		wantBody string
		wantErr  error
	}{
		{"fits", "first answer", 64, "first answer", nil},
		{"exactly the limit", long, 100, long, nil},
		{"longer than the limit", long, 10, long[:10], transport.ErrBodyTruncated},
		{"nothing kept", long, 0, "", transport.ErrBodyTruncated},
		{"empty body", "", 64, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScript(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Attempt", "1")
				w.WriteHeader(503)
				io.WriteString(w, tc.body)
			}, hijackClose)
			tr := transport.New(newBase(t), noDelay, transport.WithMaxAttempts(2), transport.WithMaxRetainedBody(tc.limit))
			resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if srv.count() < 2 { // net/http may resend the second attempt itself on a reused connection
				t.Fatalf("%d attempts, want 2", srv.count())
			}
			if resp.StatusCode != 503 || resp.Header.Get("X-Attempt") != "1" {
				t.Errorf("got %d %v, want the first attempt's 503", resp.StatusCode, resp.Header)
			}
			b, rerr := io.ReadAll(resp.Body)
			if string(b) != tc.wantBody {
				t.Errorf("body %q, want %q", b, tc.wantBody)
			}
			if tc.wantErr == nil && rerr != nil || tc.wantErr != nil && !errors.Is(rerr, tc.wantErr) {
				t.Errorf("reading the body: %v, want %v", rerr, tc.wantErr)
			}
		})
	}
}

// TestExhaustedBudgetEndsTheCallBeforeTheSleep: a 429 with Retry-After: 2
// and an empty budget comes back at once (no sleep, no retry counted), not
// after two seconds as the same 429.
func TestExhaustedBudgetEndsTheCallBeforeTheSleep(t *testing.T) {
	fc := newClock()
	var retries, backoffs atomic.Int32
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, 429, "slow down", "Retry-After", "2"), nil
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithRetryBudget(0.0001, 0),
		transport.WithHooks(transport.Hooks{
			OnRetry:   func(resilience.RetryEvent) { retries.Add(1) },
			OnBackoff: func(resilience.BackoffEvent) { backoffs.Add(1) },
		}))
	r := recv(t, goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil)), "RoundTrip without a sleep")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	if r.resp.StatusCode != 429 || fc.Armed() != 0 || retries.Load() != 0 || backoffs.Load() != 0 {
		t.Errorf("status %d, %d timers, %d retries, %d backoffs; want the 429 at once with none", r.resp.StatusCode, fc.Armed(), retries.Load(), backoffs.Load())
	}
}

// TestRetryTokenRefundedWhenTheRetryDoesNotLaunch: the token reserved
// before the sleep goes back when the caller cancels during the sleep.
func TestRetryTokenRefundedWhenTheRetryDoesNotLaunch(t *testing.T) {
	fc := newClock()
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return fakeResponse(r, 503, "down"), nil
	})
	tr := transport.New(base, transport.WithClock(fc), transport.WithRetryBudget(0, 1), transport.WithBackoff(resilience.Constant(time.Second)))
	if got := tr.Stats().BudgetTokens; got != 1 {
		t.Fatalf("tokens %v before, want 1", got)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
	waitArmed(t, fc, 1) // sleeping, with the token taken
	if got := tr.Stats().BudgetTokens; got != 0 {
		t.Errorf("tokens %v during the sleep, want 0", got)
	}
	cancel()
	if r := recv(t, done, "RoundTrip"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", r.err)
	}
	if got := tr.Stats().BudgetTokens; got != 1 {
		t.Errorf("tokens %v after the cancelled retry, want 1 (refunded)", got)
	}
}

// TestHugeMaxAttemptsWithHedging: memory per call is bounded by the
// attempts in flight, never by MaxAttempts (math.MaxInt used to panic in
// makechan, and 10,000,000 allocated 76 MiB for one request).
func TestHugeMaxAttemptsWithHedging(t *testing.T) {
	ok := roundTripperFunc(func(r *http.Request) (*http.Response, error) { return fakeResponse(r, 200, "ok"), nil })
	tests := []struct {
		name string
		tr   *transport.Transport
		ctx  func(context.Context) context.Context
	}{
		{"WithMaxAttempts(MaxInt)", transport.New(ok, transport.WithMaxAttempts(math.MaxInt), transport.WithHedging(time.Hour, 2)), nil},
		{"WithMaxAttempts(10M)", transport.New(ok, transport.WithMaxAttempts(10_000_000), transport.WithHedging(time.Hour, 2)), nil},
		{"Policy MaxAttempts MaxInt", transport.New(ok, transport.WithHedging(time.Hour, 2)), func(ctx context.Context) context.Context {
			return transport.WithPolicy(ctx, transport.Policy{MaxAttempts: math.MaxInt})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := tc.tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("one request allocated %d bytes, want far below 1 MiB", got)
			}
		})
	}
	t.Run("generic Retrier", func(t *testing.T) {
		r := resilience.NewRetrier(resilience.WithMaxAttempts(math.MaxInt), resilience.WithHedging(time.Hour, 2))
		v, err := resilience.Retry(testCtx(t), r, "k", func(context.Context) (int, error) { return 7, nil })
		if err != nil || v != 7 {
			t.Fatalf("got %v, %v", v, err)
		}
	})
}

// TestGiveUpErrorIsBounded: 10,000 failed attempts keep a handful of
// errors and a short message, with the first and the last findable.
func TestGiveUpErrorIsBounded(t *testing.T) {
	var n atomic.Int32
	first := errors.New("attempt 1 failed")
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return nil, first
		}
		return nil, fmt.Errorf("attempt %d failed: %w", n.Load(), io.ErrUnexpectedEOF)
	})
	const attempts = 10_000
	tr := transport.New(base, noDelay, transport.WithRetryBudget(0, 0), transport.WithMaxAttempts(attempts),
		transport.WithClassifier(func(transport.Attempt) transport.Decision { return transport.Retry }))
	_, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
	var ge *transport.Error
	if !errors.As(err, &ge) {
		t.Fatalf("err %v, want *transport.Error", err)
	}
	if ge.Attempts != attempts || len(ge.Errs) > maxKeptErrors || ge.Omitted != attempts-len(ge.Errs) {
		t.Errorf("Attempts %d, %d errors kept, %d omitted", ge.Attempts, len(ge.Errs), ge.Omitted)
	}
	if !errors.Is(err, first) || !strings.Contains(err.Error(), "attempt 10000 failed") || len(err.Error()) > 1024 {
		t.Errorf("message of %d bytes, first error found %v: %.300s", len(err.Error()), errors.Is(err, first), err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d more", attempts-maxKeptErrors)) {
		t.Errorf("message does not count the omitted errors: %.300s", err)
	}
}

// TestNilURLIsAnError: like net/http, a request without a URL is an error,
// and its body is closed.
func TestNilURLIsAnError(t *testing.T) {
	body := newCallerBody(strings.NewReader("x"))
	tr := transport.New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		t.Error("the base was called")
		return nil, errors.New("unreachable")
	}))
	resp, err := tr.RoundTrip(&http.Request{Method: http.MethodPut, Header: http.Header{}, Body: body})
	if err == nil || resp != nil || !strings.Contains(err.Error(), "nil Request.URL") {
		t.Errorf("got %v, %v; want a nil-URL error", resp, err)
	}
	if body.closes.Load() != 1 {
		t.Errorf("body closed %d times, want 1", body.closes.Load())
	}
}

// TestBaseReturningNothingIsAnError: a base that breaks its contract with
// (nil, nil) gets a clear error, whatever is on, never a panic.
func TestBaseReturningNothingIsAnError(t *testing.T) {
	broken := roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	tests := []struct {
		name string
		opts []transport.Option
	}{
		{"defaults", nil},
		{"hedging", []transport.Option{transport.WithHedging(time.Millisecond, 1)}},
		{"per-attempt timeout", []transport.Option{transport.WithPerAttemptTimeout(time.Second)}},
		{"OnResultDone", []transport.Option{transport.WithHooks(transport.Hooks{OnResultDone: func(resilience.ResultDoneEvent) {}})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := transport.New(broken, append(tc.opts, noDelay)...)
			resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, "http://svc.test/", nil))
			if resp != nil || !errors.Is(err, transport.ErrNilResponse) {
				t.Errorf("got %v, %v; want ErrNilResponse", resp, err)
			}
		})
	}
}

// TestBufferingABodyHonoursTheDeadline: an idempotent PUT whose body is a
// pipe nobody writes, over HTTP/2, with a 300 ms deadline. net/http returns
// the context's error at the deadline; so must the transport, which reads
// the body to buffer it for replay (it used to block until the body ended).
func TestBufferingABodyHonoursTheDeadline(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"bare net/http", base}, {"gotry", transport.New(base)}} {
		t.Run(rt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req := newRequest(t, ctx, http.MethodPut, srv.URL, pr)
			done := goRoundTrip(rt.rt, req)
			select {
			case r := <-done:
				closeResp(r)
				if !errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("err %v, want the context's deadline", r.err)
				}
			case <-time.After(retainBound):
				t.Fatal("RoundTrip did not return at the deadline while the body blocked")
			}
			if _, err := pw.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("writing to the body after RoundTrip: %v, want io.ErrClosedPipe (body closed)", err)
			}
		})
	}
}
