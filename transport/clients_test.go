package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// Issue 25: what clients that nobody on the team wrote do to gotry.

// TestNilIdempotencyKeyMarksRequestIdempotent: a header entry with no value
// (req.Header["Idempotency-Key"] = nil), which net/http documents as
// marking a request idempotent without sending the header, and which
// Prometheus' API client sets on every POST query, makes a POST retryable;
// nothing is sent under that name. An empty string value does not count.
func TestNilIdempotencyKeyMarksRequestIdempotent(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		value    []string
		wantHits int
	}{
		{"Idempotency-Key nil", "Idempotency-Key", nil, 3},
		{"X-Idempotency-Key nil", "X-Idempotency-Key", nil, 3},
		{"Idempotency-Key empty slice", "Idempotency-Key", []string{}, 3},
		{"Idempotency-Key empty string", "Idempotency-Key", []string{""}, 1},
		{"no key", "", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, reply(503))
			tr := transport.New(newBase(t), noDelay)
			req := newRequest(t, context.Background(), http.MethodPost, s.URL, strings.NewReader("query=up"))
			if tc.key != "" {
				req.Header[tc.key] = tc.value
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := s.count(); got != tc.wantHits {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantHits)
			}
			for i, h := range s.receivedHeaders() {
				if v, ok := h[tc.key]; tc.key != "" && ok && len(tc.value) == 0 {
					t.Errorf("attempt %d sent %s: %q, want no such header", i+1, tc.key, v)
				}
			}
		})
	}
}

// ownEmptyBody is an empty body that is not http.NoBody, as Go 1.26's
// HTTP/2 client answers a HEAD, a 204, a 304 or a Content-Length of 0.
type ownEmptyBody struct{ closes atomic.Int32 }

func (b *ownEmptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (b *ownEmptyBody) Close() error             { b.closes.Add(1); return nil }

// TestEmptyResponseIsFinishedByWhatItIs: an empty response is finished as
// RoundTrip returns whatever its body's type, deciding by what the response
// is (HEAD, 204, 304, Content-Length 0): over real HTTP/2, with the base's
// empty bodies replaced by one of their own as Go 1.26's HTTP/2 client
// answers them. The body is closed by then and the caller gets http.NoBody.
// A response with something to read is still finished by its body.
// (TestEmptyResponseIsFinishedAtOnce runs Go's own HTTP/2 client as it is;
// make unit-min runs it on Go 1.26.)
func TestEmptyResponseIsFinishedByWhatItIs(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/empty":
			w.Header().Set("Content-Length", "0")
		default:
			io.WriteString(w, "ok")
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	h2 := srv.Client().Transport.(*http.Transport)
	t.Cleanup(h2.CloseIdleConnections)
	tests := emptyResponseCases
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var own *ownEmptyBody
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := h2.RoundTrip(r)
				if err == nil && tc.empty {
					resp.Body.Close()
					own = &ownEmptyBody{}
					resp.Body = own
				}
				return resp, err
			})
			var done events[resilience.ResultDoneEvent]
			tr := transport.New(base, transport.WithHooks(transport.Hooks{OnResultDone: done.add}),
				transport.WithPerAttemptTimeout(2*time.Minute))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), tc.method, srv.URL+tc.path, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.ProtoMajor != 2 {
				t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
			}
			attemptCtx := resp.Request.Context()
			if got := len(done.get()); tc.empty != (got == 1) {
				t.Errorf("OnResultDone fired %d times before Close", got)
			}
			if tc.empty != (attemptCtx.Err() != nil) {
				t.Errorf("attempt context error before Close: %v", attemptCtx.Err())
			}
			if tc.empty && own.closes.Load() != 1 {
				t.Errorf("the base's empty body was closed %d times, want once", own.closes.Load())
			}
			if tc.empty && resp.Body != http.NoBody {
				t.Errorf("body %T, want http.NoBody", resp.Body)
			}
			if b := readBody(t, resp); !tc.empty && b != "ok" {
				t.Errorf("body %q, want ok", b)
			}
			if got := len(done.get()); got != 1 {
				t.Errorf("OnResultDone fired %d times in all, want 1", got)
			}
		})
	}
}

// TestAttemptHeaderReplacesCallerValueOfAnySpelling: WithAttemptHeader
// replaces the caller's value even when the caller set it under a key that
// is not canonical (req.Header["gotry-attempt"]), instead of sending both;
// the caller's request keeps its own.
func TestAttemptHeaderReplacesCallerValueOfAnySpelling(t *testing.T) {
	s := newScript(t, reply(503), reply(200))
	tr := transport.New(newBase(t), noDelay, transport.WithAttemptHeader("Gotry-Attempt"))
	req := newRequest(t, context.Background(), http.MethodGet, s.URL, nil)
	req.Header["gotry-attempt"] = []string{"the caller's"}
	req.Header["GOTRY-ATTEMPT"] = []string{"the caller's too"}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	var got [][]string
	for _, h := range s.receivedHeaders() {
		got = append(got, h.Values("Gotry-Attempt"))
	}
	if want := [][]string{{"1; initial"}, {"2; retry"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attempts sent Gotry-Attempt %q, want %q", got, want)
	}
	v := req.Header["gotry-attempt"] //nolint:staticcheck // the caller's own non-canonical key is the point
	if len(v) != 1 || v[0] != "the caller's" || len(req.Header) != 2 {
		t.Errorf("caller's headers became %q: they must not be modified", req.Header)
	}
}

// TestRetainedBodyFailsReadAfterClose: a give-up response that was kept in
// memory (a 503 superseded by an attempt that then failed) reads like
// net/http's bodies after Close: http.ErrBodyReadAfterClose, whether or
// not it was read before.
func TestRetainedBodyFailsReadAfterClose(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("read first %v", readFirst), func(t *testing.T) {
			s := newScript(t, reply(503), hijackReset)
			tr := transport.New(newBase(t), noDelay, transport.WithMaxAttempts(2))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			// (The server sees 3 arrivals: the reset hits a reused
			// connection, and net/http replays the GET once on a new
			// one, inside gotry's second attempt.)
			if resp.StatusCode != 503 {
				t.Fatalf("status %d, want the first attempt's 503", resp.StatusCode)
			}
			p := make([]byte, 4)
			if readFirst {
				if n, err := resp.Body.Read(p); n == 0 || err != nil {
					t.Fatalf("first read: %d, %v", n, err)
				}
			}
			if err := resp.Body.Close(); err != nil {
				t.Fatal(err)
			}
			if n, err := resp.Body.Read(p); n != 0 || !errors.Is(err, http.ErrBodyReadAfterClose) {
				t.Errorf("read after Close: %d, %v; want 0, http.ErrBodyReadAfterClose", n, err)
			}
		})
	}
}

// errorsNew makes an error of errors.New's type, the only type net/http's
// connection-loss errors have.
func errorsNew(msg string) error { return errors.New(msg) }

// namedError has an HTTP/2 message but a type of its own: not net/http's.
type namedError string

func (e namedError) Error() string { return string(e) }

// TestHTTP2ConnectionLossIsRetryable: net/http's HTTP/2 client reports a
// lost connection with untyped errors; exactly those messages, of
// errors.New's type, however wrapped, classify as a closed connection (and
// are retried); the same text under another type, inside a longer
// message, or the caller's own ClientConn.Close do not.
func TestHTTP2ConnectionLossIsRetryable(t *testing.T) {
	lost := errorsNew("http2: client connection lost")
	tests := []struct {
		name string
		err  error
		want transport.ErrorClass
	}{
		{"ping timeout", lost, transport.ClassConnectionClosed},
		{"ping timeout in url.Error", &url.Error{Op: "Get", URL: "https://a.test/", Err: lost}, transport.ClassConnectionClosed},
		{"ping timeout wrapped", fmt.Errorf("x: %w", lost), transport.ClassConnectionClosed},
		{"ping timeout joined", errors.Join(errors.New("y"), lost), transport.ClassConnectionClosed},
		{"closed conn", errorsNew("http2: client conn is closed"), transport.ClassConnectionClosed},
		{"unusable conn", errorsNew("http2: client conn not usable"), transport.ClassConnectionClosed},
		{"GOAWAY", errorsNew("http2: Transport received Server's graceful shutdown GOAWAY"), transport.ClassStreamRefused},
		{"ClientConn.Close", errorsNew("http2: client connection force closed via ClientConn.Close"), transport.ClassOther},
		{"longer message", errorsNew("http2: client connection lost: and more"), transport.ClassOther},
		{"message of a wrapper", fmt.Errorf("http2: client connection lost%w", errors.New("")), transport.ClassOther},
		{"another type", namedError("http2: client connection lost"), transport.ClassOther},
		{"other case", errorsNew("HTTP2: client connection lost"), transport.ClassOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := transport.ClassifyError(tc.err); got != tc.want {
				t.Errorf("ClassifyError(%q) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestAttemptTimeoutGiveUpIsToldFromCallerDeadline: the give-up after
// per-attempt timeouts matches ErrAttemptTimeout and, an attempt's timeout
// being a deadline, context.DeadlineExceeded, while the caller's context is
// alive; the caller's own deadline gives its context's error, which does not
// match ErrAttemptTimeout. ClassifyError tells them apart by that.
func TestAttemptTimeoutGiveUpIsToldFromCallerDeadline(t *testing.T) {
	hang := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	t.Run("per-attempt timeouts", func(t *testing.T) {
		fc := newClock()
		tr := transport.New(hang, noDelay, transport.WithClock(fc), transport.WithMaxAttempts(2),
			transport.WithPerAttemptTimeout(time.Second))
		ctx := context.Background()
		ch := goRoundTrip(tr, newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
		for n := 1; n <= 2; n++ {
			waitArmed(t, fc, n)
			fc.Advance(time.Second)
		}
		r := recv(t, ch, "the give-up")
		if r.err == nil {
			t.Fatal("no error")
		}
		if !errors.Is(r.err, transport.ErrAttemptTimeout) || !errors.Is(r.err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Errorf("err %v: ErrAttemptTimeout %v, DeadlineExceeded %v, caller's ctx %v; want true, true, alive",
				r.err, errors.Is(r.err, transport.ErrAttemptTimeout), errors.Is(r.err, context.DeadlineExceeded), ctx.Err())
		}
		if c := transport.ClassifyError(r.err); c != transport.ClassAttemptTimeout {
			t.Errorf("class %v, want attempt_timeout", c)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		tr := transport.New(hang, noDelay, transport.WithMaxAttempts(2), transport.WithPerAttemptTimeout(time.Hour))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://svc.test/", nil))
		if errors.Is(err, transport.ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v: ErrAttemptTimeout %v, DeadlineExceeded %v; want false, true",
				err, errors.Is(err, transport.ErrAttemptTimeout), errors.Is(err, context.DeadlineExceeded))
		}
		if c := transport.ClassifyError(err); c != transport.ClassDeadline {
			t.Errorf("class %v, want deadline", c)
		}
	})
}

// TestPanickingOnAttemptStartLeavesNoProbeSlot: OnAttemptStart panicking
// on a half-open breaker's probe propagates to the caller, and returns the
// probe slot as it unwinds: the next request to the host is admitted as a
// probe, instead of being rejected (half-open) for good.
func TestPanickingOnAttemptStartLeavesNoProbeSlot(t *testing.T) {
	fc := newClock()
	s := newScript(t, reply(503), reply(503), reply(200))
	host := hostOf(t, s.URL)
	var boom atomic.Bool
	var probes atomic.Int32
	tr := transport.New(newBase(t), noDelay, transport.WithClock(fc), transport.WithMaxAttempts(2),
		transport.WithBreaker(breakerCfg),
		transport.WithHooks(transport.Hooks{OnAttemptStart: func(ctx context.Context, e resilience.AttemptStartEvent) context.Context {
			if e.Probe {
				probes.Add(1)
				if boom.Load() {
					panic("hook")
				}
			}
			return ctx
		}}))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got, _ := tr.Stats().Host(host); got.Breaker != resilience.BreakerOpen {
		t.Fatalf("breaker %v after two 503s, want open", got.Breaker)
	}
	fc.Advance(breakerCfg.OpenDuration)

	boom.Store(true)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the hook's panic did not propagate")
			}
		}()
		_, _ = tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil)) //nolint:bodyclose // it panics
	}()
	boom.Store(false)

	resp, err = tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatalf("request after the panic: %v; want it admitted as a probe", err)
	}
	if b := readBody(t, resp); b != "reply 200" || probes.Load() != 2 {
		t.Errorf("got %q after %d probes, want reply 200 from the second probe", b, probes.Load())
	}
	if got, _ := tr.Stats().Host(host); got.Breaker != resilience.BreakerClosed {
		t.Errorf("breaker %v after a successful probe, want closed", got.Breaker)
	}
}
