package transport_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

func TestNewNilBaseWrapsDefaultTransport(t *testing.T) {
	if got := transport.New(nil).Unwrap(); got != http.DefaultTransport {
		t.Fatalf("Unwrap() = %v, want http.DefaultTransport", got)
	}
}

func TestDefaultsRetryThreeAttempts(t *testing.T) {
	s := newScript(t, reply(503))
	tr := transport.New(newBase(t), noDelay)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := s.count(); got != transport.DefaultMaxAttempts {
		t.Fatalf("server saw %d attempts, want %d", got, transport.DefaultMaxAttempts)
	}
}

func TestRetryableStatuses(t *testing.T) {
	tests := []struct {
		name     string
		opts     []transport.Option
		status   int
		wantHits int
	}{
		{"502 retried", nil, 502, 3},
		{"503 retried", nil, 503, 3},
		{"504 retried", nil, 504, 3},
		{"429 retried", nil, 429, 3},
		{"500 not retried", nil, 500, 1},
		{"501 not retried", nil, 501, 1},
		{"404 not retried", nil, 404, 1},
		{"400 not retried", nil, 400, 1},
		{"200 not retried", nil, 200, 1},
		{"replaced set retries 500", []transport.Option{transport.WithRetryableStatuses(500)}, 500, 3},
		{"replaced set drops 503", []transport.Option{transport.WithRetryableStatuses(500)}, 503, 1},
		{"replaced set drops 502", []transport.Option{transport.WithRetryableStatuses(500)}, 502, 1},
		{"replaced set keeps 429", []transport.Option{transport.WithRetryableStatuses(500)}, 429, 3},
		{"empty set keeps 429", []transport.Option{transport.WithRetryableStatuses()}, 429, 3},
		{"empty set drops 504", []transport.Option{transport.WithRetryableStatuses()}, 504, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(tc.status))
			tr := transport.New(newBase(t), append([]transport.Option{noDelay}, tc.opts...)...)
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatalf("RoundTrip error %v, want the %d response", err, tc.status)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if body := readBody(t, resp); body != fmt.Sprintf("reply %d", tc.status) {
				t.Errorf("body %q", body)
			}
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
		})
	}
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	tests := []struct {
		name string
		fail http.HandlerFunc
	}{
		{"connection closed without reply", hijackClose},
		{"connection reset", hijackReset},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, tc.fail, tc.fail, reply(200))
			tr := transport.New(newBase(t), noDelay)
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if body := readBody(t, resp); body != "reply 200" {
				t.Errorf("body %q, want the third attempt's", body)
			}
			if got := s.count(); got != 3 {
				t.Errorf("server saw %d attempts, want 3", got)
			}
		})
	}
}

func TestRefusedConnectionIsRetriedThenGivesUpWithError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	log := &attemptLog{base: newBase(t)}
	tr := transport.New(log, noDelay)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://"+addr+"/", nil))
	if resp != nil {
		resp.Body.Close()
		t.Fatalf("got a response from a closed port")
	}
	var ge *transport.Error
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v (%T), want *transport.Error", err, err)
	}
	if ge.Attempts != 3 {
		t.Errorf("Attempts = %d, want 3", ge.Attempts)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(err, ECONNREFUSED) = false for %v", err)
	}
	if got := len(log.requests()); got != 3 {
		t.Errorf("base saw %d attempts, want 3", got)
	}
}

func TestPerAttemptTimeoutIsRetried(t *testing.T) {
	fc := newClock()
	gone := make(chan int, 4)
	s := newScript(t, hang(gone), reply(200))
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithPerAttemptTimeout(time.Second))

	done := goRoundTrip(tr, newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
	recv(t, s.arrived, "attempt 1")
	waitArmed(t, fc, 1)
	fc.Advance(time.Second)
	recv(t, gone, "attempt 1 to be cut off")
	r := recv(t, done, "RoundTrip")
	if r.err != nil {
		t.Fatalf("RoundTrip: %v", r.err)
	}
	if body := readBody(t, r.resp); body != "reply 200" {
		t.Errorf("body %q, want the retry's", body)
	}
	if got := s.count(); got != 2 {
		t.Errorf("server saw %d attempts, want 2", got)
	}
}

func TestEveryAttemptTimingOutGivesUpWithAttemptTimeoutError(t *testing.T) {
	fc := newClock()
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	tr := transport.New(base, noDelay, transport.WithClock(fc), transport.WithMaxAttempts(2),
		transport.WithPerAttemptTimeout(time.Second))
	ctx := testCtx(t)
	done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
	waitArmed(t, fc, 1)
	fc.Advance(time.Second)
	waitArmed(t, fc, 2)
	fc.Advance(time.Second)
	r := recv(t, done, "RoundTrip")
	var ge *transport.Error
	if !errors.As(r.err, &ge) || ge.Attempts != 2 {
		t.Fatalf("err = %v, want *transport.Error after 2 attempts", r.err)
	}
	if !errors.Is(r.err, transport.ErrAttemptTimeout) {
		t.Errorf("errors.Is(err, ErrAttemptTimeout) = false for %v", r.err)
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, context.DeadlineExceeded) = false for %v", r.err)
	}
	if ctx.Err() != nil {
		t.Errorf("caller's context ended: %v", ctx.Err())
	}
}

func TestContextErrorsFromAttemptsAreNotRetried(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"canceled", context.Canceled},
		{"deadline exceeded", context.DeadlineExceeded},
		{"wrapped canceled", fmt.Errorf("dial: %w", context.Canceled)},
		{"wrapped deadline", &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("i/o: %w", context.DeadlineExceeded)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				calls.Add(1)
				return nil, tc.err
			})
			tr := transport.New(base, noDelay)
			_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			if got := calls.Load(); got != 1 {
				t.Errorf("%d attempts, want 1", got)
			}
		})
	}
}

func TestDNSErrors(t *testing.T) {
	tests := []struct {
		name        string
		err         *net.DNSError
		wantCalls   int32
		wantWrapped bool
	}{
		{"not found is final", &net.DNSError{Err: "no such host", Name: "nope.test", IsNotFound: true}, 1, false},
		{"timeout is retried", &net.DNSError{Err: "i/o timeout", Name: "slow.test", IsTimeout: true}, 3, true},
		{"temporary is retried", &net.DNSError{Err: "server misbehaving", Name: "bad.test", IsTemporary: true}, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				calls.Add(1)
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: tc.err}
			})
			// No budget: a fresh client's reserve absorbs one timeout's
			// retry, and this test is about classification.
			tr := transport.New(base, noDelay, transport.WithRetryBudget(0, 0))
			_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) || dnsErr != tc.err {
				t.Errorf("err = %v, want the DNS error", err)
			}
			var ge *transport.Error
			if got := errors.As(err, &ge); got != tc.wantWrapped {
				t.Errorf("wrapped in *transport.Error = %v, want %v", got, tc.wantWrapped)
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("%d attempts, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestTLSCertificateErrorIsNotRetried(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("handler reached through an untrusted certificate")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	log := &attemptLog{base: newBase(t)} // trusts only the system roots
	tr := transport.New(log, noDelay)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if resp != nil {
		resp.Body.Close()
	}
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("err = %v, want a certificate verification error", err)
	}
	var ge *transport.Error
	if errors.As(err, &ge) {
		t.Errorf("single-attempt error wrapped in *transport.Error: %v", err)
	}
	if got := len(log.requests()); got != 1 {
		t.Errorf("%d attempts, want 1", got)
	}
}

func TestIdempotency(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		header   string
		opts     []transport.Option
		policy   *transport.Policy
		wantHits int
	}{
		{"GET", http.MethodGet, "", nil, nil, 3},
		{"HEAD", http.MethodHead, "", nil, nil, 3},
		{"OPTIONS", http.MethodOptions, "", nil, nil, 3},
		{"TRACE", http.MethodTrace, "", nil, nil, 3},
		{"PUT", http.MethodPut, "", nil, nil, 3},
		{"DELETE", http.MethodDelete, "", nil, nil, 3},
		{"POST", http.MethodPost, "", nil, nil, 1},
		{"PATCH", http.MethodPatch, "", nil, nil, 1},
		{"unknown method", "PURGE", "", nil, nil, 1},
		{"POST with Idempotency-Key", http.MethodPost, "Idempotency-Key", nil, nil, 3},
		{"POST with X-Idempotency-Key", http.MethodPost, "X-Idempotency-Key", nil, nil, 3},
		{"PATCH with Idempotency-Key", http.MethodPatch, "Idempotency-Key", nil, nil, 3},
		{"POST with non-idempotent retries", http.MethodPost, "", []transport.Option{transport.WithNonIdempotentRetries(true)}, nil, 3},
		{"PATCH with non-idempotent retries", http.MethodPatch, "", []transport.Option{transport.WithNonIdempotentRetries(true)}, nil, 3},
		{"POST with non-idempotent retries off", http.MethodPost, "", []transport.Option{transport.WithNonIdempotentRetries(false)}, nil, 1},
		{"POST with Policy.RetryNonIdempotent", http.MethodPost, "", nil, &transport.Policy{RetryNonIdempotent: true}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(503))
			tr := transport.New(newBase(t), append([]transport.Option{noDelay}, tc.opts...)...)
			ctx := context.Background()
			if tc.policy != nil {
				ctx = transport.WithPolicy(ctx, *tc.policy)
			}
			req := newRequest(t, ctx, tc.method, s.URL, strings.NewReader("payload"))
			if tc.header != "" {
				req.Header.Set(tc.header, "key-1")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
		})
	}
}

func TestExhaustedRetriesReturnMostRecentResponse(t *testing.T) {
	s := newScript(t, replyN(503))
	log := &attemptLog{base: newBase(t)}
	tr := transport.New(log, noDelay)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatalf("err = %v, want the 503 with a nil error", err)
	}
	if resp.StatusCode != 503 {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	if body := readBody(t, resp); body != "attempt 3" {
		t.Errorf("body %q, want the most recent attempt's", body)
	}
	bodies := log.responseBodies()
	if len(bodies) != 3 {
		t.Fatalf("%d attempts, want 3", len(bodies))
	}
	for i, b := range bodies[:2] {
		if b.closes.Load() == 0 {
			t.Errorf("superseded response %d was not closed", i+1)
		}
	}
}

func TestAllAttemptsFailingReturnsErrorWithEveryAttempt(t *testing.T) {
	errs := []error{
		fmt.Errorf("first: %w", errReset),
		fmt.Errorf("second: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("third: %w", io.EOF),
	}
	var n atomic.Int32
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return nil, errs[n.Add(1)-1]
	})
	tr := transport.New(base, noDelay)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
	if resp != nil {
		t.Fatalf("response %v with error %v", resp.Status, err)
	}
	var ge *transport.Error
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v (%T), want *transport.Error", err, err)
	}
	if ge.Attempts != 3 {
		t.Errorf("Attempts = %d, want 3", ge.Attempts)
	}
	if ge.Err != errs[2] {
		t.Errorf("Err = %v, want the last attempt's error", ge.Err)
	}
	for i, want := range errs {
		if !errors.Is(err, want) {
			t.Errorf("errors.Is(err, attempt %d's error) = false", i+1)
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("errors.Is(err, ECONNRESET) = false: the first attempt's cause is lost")
	}
}

func TestSingleAttemptErrorIsReturnedUnwrapped(t *testing.T) {
	tests := []struct {
		name   string
		method string
		opts   []transport.Option
		ctx    context.Context
	}{
		{"MaxAttempts 1", http.MethodGet, []transport.Option{transport.WithMaxAttempts(1)}, context.Background()},
		{"NoRetry policy", http.MethodGet, nil, transport.WithPolicy(context.Background(), transport.NoRetry())},
		{"POST", http.MethodPost, nil, context.Background()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				calls.Add(1)
				return nil, errReset
			})
			tr := transport.New(base, append([]transport.Option{noDelay}, tc.opts...)...)
			_, err := tr.RoundTrip(newRequest(t, tc.ctx, tc.method, "http://svc.test/", nil))
			if err != error(errReset) {
				t.Errorf("err = %v (%T), want the attempt's error itself", err, err)
			}
			if got := calls.Load(); got != 1 {
				t.Errorf("%d attempts, want 1", got)
			}
		})
	}
}

func TestCallerCancellationReturnsContextError(t *testing.T) {
	tests := []struct {
		name    string
		opts    func(fc *fakeclock.Clock) []transport.Option
		step    func(gone chan int) http.HandlerFunc
		trigger func(t *testing.T, fc *fakeclock.Clock, s *script)
	}{
		{
			name: "during an attempt",
			opts: func(*fakeclock.Clock) []transport.Option { return nil },
			step: func(gone chan int) http.HandlerFunc { return hang(gone) },
			trigger: func(t *testing.T, fc *fakeclock.Clock, s *script) {
				recv(t, s.arrived, "attempt 1")
			},
		},
		{
			name: "during a backoff sleep",
			opts: func(fc *fakeclock.Clock) []transport.Option {
				return []transport.Option{transport.WithClock(fc), transport.WithBackoff(resilience.Constant(time.Hour))}
			},
			step: func(chan int) http.HandlerFunc { return reply(503) },
			trigger: func(t *testing.T, fc *fakeclock.Clock, s *script) {
				recv(t, s.arrived, "attempt 1")
				waitArmed(t, fc, 1)
			},
		},
		{
			name: "during an attempt with a per-attempt timeout",
			opts: func(fc *fakeclock.Clock) []transport.Option {
				return []transport.Option{transport.WithClock(fc), transport.WithPerAttemptTimeout(time.Hour)}
			},
			step: func(gone chan int) http.HandlerFunc { return hang(gone) },
			trigger: func(t *testing.T, fc *fakeclock.Clock, s *script) {
				recv(t, s.arrived, "attempt 1")
			},
		},
		{
			name: "during hedged attempts",
			opts: func(fc *fakeclock.Clock) []transport.Option {
				return []transport.Option{transport.WithClock(fc), transport.WithHedging(time.Second, 1)}
			},
			step: func(gone chan int) http.HandlerFunc { return hang(gone) },
			trigger: func(t *testing.T, fc *fakeclock.Clock, s *script) {
				recv(t, s.arrived, "attempt 1")
				waitArmed(t, fc, 1)
				fc.Advance(time.Second)
				recv(t, s.arrived, "the hedge")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			gone := make(chan int, 4)
			s := newScript(t, tc.step(gone))
			tr := transport.New(newBase(t), tc.opts(fc)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, s.URL, nil))
			tc.trigger(t, fc, s)
			cancel()
			r := recv(t, done, "RoundTrip")
			closeResp(r)
			if r.err != context.Canceled {
				t.Errorf("err = %v (%T), want context.Canceled itself", r.err, r.err)
			}
			var ge *transport.Error
			if errors.As(r.err, &ge) {
				t.Errorf("caller cancellation wrapped in *transport.Error")
			}
		})
	}
}

func TestCallerDeadlineReturnsDeadlineExceeded(t *testing.T) {
	gone := make(chan int, 1)
	s := newScript(t, hang(gone))
	tr := transport.New(newBase(t), noDelay)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, s.URL, nil))
	closeResp(result{resp, err})
	if err != context.DeadlineExceeded {
		t.Errorf("err = %v (%T), want context.DeadlineExceeded itself", err, err)
	}
	if got := s.count(); got > 1 {
		t.Errorf("server saw %d attempts, want at most 1", got)
	}
}

func TestGiveUpPrefersTheMostRecentRetryableResponseOverLaterErrors(t *testing.T) {
	resp := func(code int, body string) func(*http.Request) (*http.Response, error) {
		return func(r *http.Request) (*http.Response, error) { return fakeResponse(r, code, body), nil }
	}
	tests := []struct {
		name       string
		steps      []func(*http.Request) (*http.Response, error)
		wantStatus int
		wantBody   string
	}{
		{"response, then errors", []func(*http.Request) (*http.Response, error){resp(503, "first"), failWith(errReset), failWith(errReset)}, 503, "first"},
		{"error, response, error", []func(*http.Request) (*http.Response, error){failWith(errReset), resp(429, "second"), failWith(io.EOF)}, 429, "second"},
		{"two responses, then an error", []func(*http.Request) (*http.Response, error){resp(503, "a"), resp(502, "b"), failWith(errReset)}, 502, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := sequence(tc.steps...)
			tr := transport.New(base, noDelay)
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
			if err != nil {
				t.Fatalf("err = %v, want the retained response", err)
			}
			if body := readBody(t, resp); resp.StatusCode != tc.wantStatus || body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestNonRetryableErrorAfterARetryableResponseWins(t *testing.T) {
	base, _ := sequence(status(503), failWith(dnsNotFound))
	tr := transport.New(base, noDelay)
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
	closeResp(result{resp, err})
	var ge *transport.Error
	if resp != nil || !errors.As(err, &ge) || ge.Attempts != 2 || ge.Err != error(dnsNotFound) {
		t.Errorf("RoundTrip = %v, %v; want *transport.Error with the DNS error after 2 attempts", resp, err)
	}
}
