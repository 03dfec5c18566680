package transport_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// echoUpgradeServer answers "Upgrade: echo" with 101 and echoes the
// connection back.
func echoUpgradeServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		io.Copy(conn, rw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSwitchingProtocolsBodyIsReadWriteCloser(t *testing.T) {
	noHooks := func(func(resilience.ResultDoneEvent)) transport.Hooks { return transport.Hooks{} }
	bodyHook := func(add func(resilience.ResultDoneEvent)) transport.Hooks { return transport.Hooks{OnResultDone: add} }
	tests := []struct {
		name      string
		opts      []transport.Option
		hooks     func(add func(resilience.ResultDoneEvent)) transport.Hooks
		wantHooks int
	}{
		{"no hooks", nil, noHooks, 0},
		{"OnResultDone wraps the body", nil, bodyHook, 1},
		{"per-attempt timeout", []transport.Option{transport.WithPerAttemptTimeout(time.Minute)}, noHooks, 0},
		{"per-attempt timeout and OnResultDone", []transport.Option{transport.WithPerAttemptTimeout(time.Minute)}, bodyHook, 1},
		{"hedging configured", []transport.Option{transport.WithHedging(time.Millisecond, 2)}, noHooks, 0},
		{"retries off", []transport.Option{transport.WithMaxAttempts(1)}, noHooks, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := echoUpgradeServer(t)
			var closed events[resilience.ResultDoneEvent]
			tr := transport.New(newBase(t), append([]transport.Option{transport.WithHooks(tc.hooks(closed.add))}, tc.opts...)...)
			req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d, want 101", resp.StatusCode)
			}
			rw, ok := resp.Body.(io.ReadWriteCloser)
			if !ok {
				t.Fatalf("101 body %T is not an io.ReadWriteCloser", resp.Body)
			}
			if _, err := io.WriteString(rw, "ping\n"); err != nil {
				t.Fatalf("writing to the upgraded connection: %v", err)
			}
			line, err := bufio.NewReader(rw).ReadString('\n')
			if err != nil || line != "ping\n" {
				t.Fatalf("echo = %q, %v; want ping", line, err)
			}
			if err := rw.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if got := len(closed.get()); got != tc.wantHooks {
				t.Errorf("OnResultDone fired %d times, want %d", got, tc.wantHooks)
			}
		})
	}
}

// slowServer writes part one, flushes, waits for next (or the client to
// leave) and writes part two.
func slowServer(t *testing.T, part1, part2 string, next <-chan struct{}) *script {
	return newScript(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, part1)
		http.NewResponseController(w).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, part2)
	})
}

func TestResponseBodyStreamsThrough(t *testing.T) {
	tests := []struct {
		name string
		opts []transport.Option
	}{
		{"defaults", nil},
		{"hooks", []transport.Option{transport.WithHooks(transport.Hooks{OnResultDone: func(resilience.ResultDoneEvent) {}})}},
		{"hedging", []transport.Option{transport.WithHedging(time.Hour, 1)}},
		{"per-attempt timeout", []transport.Option{transport.WithPerAttemptTimeout(time.Hour)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := make(chan struct{})
			s := slowServer(t, "first chunk;", "second chunk", next)
			tr := transport.New(newBase(t), tc.opts...)
			resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, len("first chunk;"))
			if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first chunk;" {
				t.Fatalf("first chunk %q, %v", first, err)
			}
			close(next)
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "second chunk" {
				t.Errorf("rest %q, %v; want the second chunk", rest, err)
			}
		})
	}
}

// TestWinnerContextLivesUntilBodyClose pins that neither the per-attempt
// timeout nor hedge cancellation cuts off a body being read, and that the
// winner's context is released once the body is closed.
func TestWinnerContextLivesUntilBodyClose(t *testing.T) {
	tests := []struct {
		name string
		opts func(fc *fakeclock.Clock) []transport.Option
	}{
		{"per-attempt timeout", func(fc *fakeclock.Clock) []transport.Option {
			return []transport.Option{transport.WithClock(fc), transport.WithPerAttemptTimeout(time.Second)}
		}},
		{"hedging", func(fc *fakeclock.Clock) []transport.Option {
			return []transport.Option{transport.WithClock(fc), transport.WithHedging(time.Second, 1)}
		}},
		{"both", func(fc *fakeclock.Clock) []transport.Option {
			return []transport.Option{transport.WithClock(fc), transport.WithHedging(time.Minute, 1), transport.WithPerAttemptTimeout(time.Second)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			next := make(chan struct{})
			s := slowServer(t, "head;", "tail", next)
			log := &attemptLog{base: newBase(t)}
			tr := transport.New(log, tc.opts(fc)...)
			resp, err := tr.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			ctx := log.requests()[0].Context()
			head := make([]byte, len("head;"))
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatal(err)
			}
			fc.Advance(time.Hour) // long past the per-attempt timeout and the hedge delay
			if ctx.Err() != nil {
				t.Fatalf("winner's context ended while its body was being read: %v", context.Cause(ctx))
			}
			close(next)
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "tail" {
				t.Errorf("rest of the body %q, %v; want it whole", rest, err)
			}
			resp.Body.Close()
			if ctx.Err() == nil {
				t.Errorf("winner's context still live after Close")
			}
			if got := s.count(); got != 1 {
				t.Errorf("server saw %d attempts, want 1", got)
			}
		})
	}
}

func TestPerAttemptTimeoutDoesNotCutASlowBodyRealClock(t *testing.T) {
	const timeout = 500 * time.Millisecond
	s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "head;")
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(3 * timeout):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "tail")
	})
	tr := transport.New(newBase(t), transport.WithPerAttemptTimeout(timeout))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, s.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); body != "head;tail" {
		t.Errorf("body %q, want it whole", body)
	}
}

// ctxBody fails reads once ctx has ended, like a real transport's body.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *ctxBody) Close() error { return nil }

// TestTimeoutFiringAsHeadersArriveNeverReturnsACancelledResponse pins the
// race where the per-attempt timer fires just as the attempt returns: the
// transport must either retry or return a response whose context stays live
// until Close, never a response that is cancelled afterwards.
func TestTimeoutFiringAsHeadersArriveNeverReturnsACancelledResponse(t *testing.T) {
	for i := range 50 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			fc := newClock()
			var n atomic.Int32
			first := make(chan context.Context, 1)
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				resp := fakeResponse(r, 200, "")
				resp.Body = &ctxBody{ctx: r.Context(), r: strings.NewReader("all of it")}
				if n.Add(1) == 1 {
					first <- r.Context()
					fc.Advance(time.Second) // the timeout fires as the headers arrive
				}
				return resp, nil
			})
			tr := transport.New(base, noDelay, transport.WithClock(fc), transport.WithPerAttemptTimeout(time.Second))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://svc.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			ctx := <-first
			select { // the first attempt's timer has fired; wait for its cancellation to land
			case <-ctx.Done():
			case <-time.After(wait):
				t.Fatal("first attempt's context never ended")
			}
			if body := readBody(t, resp); body != "all of it" {
				t.Errorf("body %q", body)
			}
		})
	}
}

func TestConcurrentUseOfOneTransport(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		if n%3 == 0 {
			w.WriteHeader(503)
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	var stateChanges atomic.Int64
	tr := transport.New(newBase(t),
		transport.WithBackoff(resilience.Constant(time.Millisecond)),
		transport.WithHedging(5*time.Millisecond, 1),
		transport.WithPerAttemptTimeout(10*time.Second),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1000}),
		transport.WithHooks(transport.Hooks{
			OnBreakerStateChange: func(resilience.BreakerStateEvent) { stateChanges.Add(1) },
			OnResultDone:         func(resilience.ResultDoneEvent) {},
		}))
	client := &http.Client{Transport: tr}
	host := hostOf(t, srv.URL)

	var wg sync.WaitGroup
	errs := make(chan error, 32*20)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				_ = tr.Stats()
				breakerState(tr, host)
				req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader(fmt.Sprintf("g%d-%d", g, i)))
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "ok" || (resp.StatusCode != 200 && resp.StatusCode != 503) {
					errs <- fmt.Errorf("status %d body %q err %v", resp.StatusCode, b, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := breakerState(tr, host); got != resilience.BreakerClosed {
		t.Errorf("BreakerState = %v, want closed", got)
	}
}

// TestReadmeQuickStart runs the README's configuration through an
// http.Client against a flaky server, with the real clock.
func TestReadmeQuickStart(t *testing.T) {
	s := newScript(t, reply(503), reply(502), reply(200))
	tr := transport.New(newBase(t),
		transport.WithMaxAttempts(4),
		transport.WithBackoff(resilience.ExponentialJitter(time.Millisecond, 5*time.Millisecond)),
		transport.WithRetryBudget(0.1, 10),
		transport.WithHedging(5*time.Second, 2),
	)
	client := &http.Client{Transport: tr}
	resp, err := client.Get(s.URL + "/users/1")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); body != "reply 200" {
		t.Errorf("body %q, want the third attempt's", body)
	}

	post := newScript(t, reply(503))
	ctx := transport.WithPolicy(context.Background(), transport.NoRetry())
	req := newRequest(t, ctx, http.MethodPost, post.URL+"/orders", strings.NewReader(`{"item":"book"}`))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != 503 || post.count() != 1 {
		t.Errorf("NoRetry POST: status %d after %d attempts, want one 503", resp.StatusCode, post.count())
	}
}

// TestReadmeErrorDetection follows Example_errors' switch: rejected at
// admission, gave up after several attempts, single-attempt error.
func TestReadmeErrorDetection(t *testing.T) {
	fc := newClock()
	var calls atomic.Int32
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, errReset
	})
	tr := transport.New(base, noDelay, transport.WithClock(fc),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 4, OpenDuration: time.Minute}))
	client := &http.Client{Transport: tr}

	_, err := client.Get("http://svc.test/a") // three failures: gave up
	var ge *transport.Error
	if !errors.As(err, &ge) || ge.Attempts != 3 || errors.Is(err, transport.ErrCircuitOpen) {
		t.Errorf("first call: %v, want *transport.Error after 3 attempts", err)
	}
	req := newRequest(t, transport.WithPolicy(context.Background(), transport.NoRetry()), http.MethodGet, "http://svc.test/b", nil)
	_, err = client.Do(req) // fourth failure opens the breaker
	if !errors.Is(err, errReset) || errors.As(err, &ge) {
		t.Errorf("single attempt: %v, want the attempt's error unwrapped", err)
	}
	_, err = client.Get("http://svc.test/c")
	if !errors.Is(err, transport.ErrCircuitOpen) {
		t.Errorf("third call: %v, want ErrCircuitOpen", err)
	}
	if got := calls.Load(); got != 4 {
		t.Errorf("%d attempts, want 4", got)
	}
}

// TestEmptyResponseIsFinishedAtOnce: a response with nothing to read (a
// HEAD, a 204, a 304, a Content-Length of 0, over HTTP/1.1 and HTTP/2
// alike; Go 1.27's http.Transport answers them with http.NoBody, Go 1.26's
// HTTP/2 client with an empty body of its own, and make unit-min runs this
// on Go 1.26) ends its attempt as RoundTrip returns: OnResultDone has fired
// and the attempt's own context is cancelled before the caller closes
// anything, and the body is http.NoBody itself, unwrapped. A response with
// a body is still finished only when the body is.
func TestEmptyResponseIsFinishedAtOnce(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	})
	h1 := httptest.NewServer(handler)
	t.Cleanup(h1.Close)
	h2 := httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	tests := emptyResponseCases
	for _, srv := range []struct {
		name  string
		major int // the protocol's major version
		url   string
		base  func() http.RoundTripper
	}{
		{"HTTP/1.1", 1, h1.URL, func() http.RoundTripper { return newBase(t) }},
		{"HTTP/2", 2, h2.URL, func() http.RoundTripper { return h2.Client().Transport }},
	} {
		for _, tc := range tests {
			t.Run(srv.name+" "+tc.method+" "+tc.path, func(t *testing.T) {
				var done events[resilience.ResultDoneEvent]
				tr := transport.New(srv.base(), transport.WithHooks(transport.Hooks{OnResultDone: done.add}),
					transport.WithBreaker(resilience.BreakerConfig{}),
					transport.WithHedging(time.Minute, 1), transport.WithPerAttemptTimeout(2*time.Minute))
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), tc.method, srv.url+tc.path, nil))
				if err != nil {
					t.Fatal(err)
				}
				if resp.ProtoMajor != srv.major {
					t.Fatalf("protocol %s, want %s", resp.Proto, srv.name)
				}
				attemptCtx := resp.Request.Context()
				if got := len(done.get()); tc.empty != (got == 1) {
					t.Errorf("OnResultDone fired %d times before Close", got)
				}
				if tc.empty != (attemptCtx.Err() != nil) {
					t.Errorf("attempt context error before Close: %v", attemptCtx.Err())
				}
				if tc.empty && resp.Body != http.NoBody {
					t.Errorf("body %T, want http.NoBody", resp.Body)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if got := len(done.get()); got != 1 {
					t.Errorf("OnResultDone fired %d times in all, want 1", got)
				}
				if attemptCtx.Err() == nil {
					t.Error("attempt context alive after Close")
				}
			})
		}
	}
}

// emptyResponseCases are requests to emptyHandler-style servers whose
// responses have nothing to read (empty) or a body ("/" for GET).
var emptyResponseCases = []struct {
	method, path string
	empty        bool
}{
	{http.MethodHead, "/", true},
	{http.MethodGet, "/204", true},
	{http.MethodGet, "/304", true},
	{http.MethodGet, "/empty", true},
	{http.MethodGet, "/", false},
}
