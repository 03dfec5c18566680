package transport_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// This file is the chaos suite: real loopback servers that break in the ways
// real servers do, and what the caller of the transport sees for each. Its
// helpers are shared by sideeffects_test.go, soak_test.go, memory_test.go and
// the fuzz targets.

// baseFunc adapts a function to http.RoundTripper.
type baseFunc func(*http.Request) (*http.Response, error)

func (f baseFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// memResponse is an in-memory response with header pairs kv.
func memResponse(r *http.Request, code int, body string, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

// errMemReset is a connection reset as net reports it.
var errMemReset = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

// ledger wraps a base transport and counts the attempts it sends and the
// response bodies it hands out and sees closed, so a test can prove that
// every body the transport received was closed, losers and retried
// responses included.
type ledger struct {
	base                  http.RoundTripper
	calls, opened, closed atomic.Int64
}

func newLedger(base http.RoundTripper) *ledger { return &ledger{base: base} }

func (l *ledger) RoundTrip(r *http.Request) (*http.Response, error) {
	l.calls.Add(1)
	resp, err := l.base.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		l.opened.Add(1)
		resp.Body = &ledgerBody{rc: resp.Body, l: l}
	}
	return resp, err
}

// waitBalanced waits until every body handed out has been closed. Losing
// hedges are closed on their own goroutines, so this polls.
func (l *ledger) waitBalanced(t interface {
	Helper()
	Fatalf(string, ...any)
}) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for l.opened.Load() != l.closed.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("response bodies: %d handed out, %d closed", l.opened.Load(), l.closed.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type ledgerBody struct {
	rc   io.ReadCloser
	l    *ledger
	once sync.Once
}

func (b *ledgerBody) Read(p []byte) (int, error) { return b.rc.Read(p) }

func (b *ledgerBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() { b.l.closed.Add(1) })
	return err
}

// noLeaksAfter checks, when the test and all its cleanups are done, that no
// goroutine it started is still running. Call it first so its cleanup runs
// last.
func noLeaksAfter(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// faultServer is a loopback HTTP server that answers hit n with steps[n-1]
// (the last step repeats) and counts hits.
type faultServer struct {
	*httptest.Server
	hits atomic.Int32
}

// newFaultServer starts an HTTP/1.1 server, or HTTP/2 over TLS when h2.
// The server's client connections are closed and the server shut down when
// the test ends.
func newFaultServer(t *testing.T, h2 bool, steps ...http.HandlerFunc) *faultServer {
	s := &faultServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.hits.Add(1))
		steps[min(n, len(steps))-1](w, r)
	}))
	// Faults make the server log (aborted handshakes, hijacked
	// connections); what matters is asserted on the client side.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	if h2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

// base returns a transport to reach s: the server's own client transport for
// HTTP/2, a fresh http.Transport otherwise. Idle connections are closed when
// the test ends.
func (s *faultServer) base(t *testing.T) *http.Transport {
	var b *http.Transport
	if s.TLS != nil {
		b = s.Client().Transport.(*http.Transport)
	} else {
		b = &http.Transport{}
	}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

func (s *faultServer) count() int { return int(s.hits.Load()) }

// Fault handlers.

// okBody is what a healthy handler answers.
const okBody = "all good"

func answerOK(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	io.WriteString(w, okBody)
}

func answerStatus(code int, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, "status "+strconv.Itoa(code))
	}
}

// hijackConn takes the connection over once the request has been read.
func hijackConn(w http.ResponseWriter, r *http.Request) net.Conn {
	io.Copy(io.Discard, r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	return conn
}

// resetBeforeHeaders answers nothing and resets the connection (RST).
func resetBeforeHeaders(w http.ResponseWriter, r *http.Request) {
	conn := hijackConn(w, r)
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// partialResponse promises 1000 bytes and sends 100. With rst nil it then
// closes the connection cleanly; otherwise it waits until rst is closed (the
// caller has the headers) and resets the connection.
func partialResponse(rst <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn := hijackConn(w, r)
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: text/plain\r\n\r\n"+strings.Repeat("x", 100))
		if rst != nil {
			select {
			case <-rst:
			case <-time.After(time.Minute):
			}
			conn.(*net.TCPConn).SetLinger(0)
		}
		conn.Close()
	}
}

// closeOnEnd is a hook that closes ch when RoundTrip is about to return.
func closeOnEnd(ch chan struct{}) transport.Option {
	return transport.WithHooks(transport.Hooks{OnCallEnd: func(resilience.CallEndEvent) { close(ch) }})
}

// waitCount waits until c reaches want (a server handler counts after the
// client has moved on) and reports whether it did.
func waitCount(c *atomic.Int32, want int32) bool {
	deadline := time.Now().Add(10 * time.Second)
	for c.Load() < want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return c.Load() == want
}

// hangUntilGone sends nothing until the client gives up on the request (or
// a minute passes), and counts the give-ups on gone.
func hangUntilGone(gone *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// An HTTP/1 server notices the client leaving only once the request
		// body has been read.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			gone.Add(1)
		case <-time.After(time.Minute):
		}
	}
}

// slowBody sends the headers and a first part at once and the rest after d.
func slowBody(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "part1")
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "part2")
	}
}

// within receives from ch or fails the test after 20s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}

// connBroken reports whether err is one of the ways a broken connection
// shows up: reset, broken pipe, EOF or unexpected EOF.
func connBroken(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// chaosOutcome is what a caller saw for one request.
type chaosOutcome struct {
	resp    *http.Response
	err     error
	body    string
	readErr error
	hits    int
	end     resilience.CallEndEvent
	closed  []resilience.ResultDoneEvent
	gone    *atomic.Int32 // hung attempts the server saw abandoned
}

// giveUpAfter asserts err is a *transport.Error after n attempts.
func giveUpAfter(t *testing.T, err error, n int) {
	t.Helper()
	var ge *transport.Error
	if !errors.As(err, &ge) || ge.Attempts != n {
		t.Fatalf("err = %v, want a *transport.Error after %d attempts", err, n)
	}
}

func TestChaosHTTP1(t *testing.T) {
	noLeaksAfter(t)
	var gone atomic.Int32
	headersIn := make(chan struct{})
	quick := []transport.Option{transport.WithBackoff(resilience.Constant(0)), transport.WithRetryBudget(0, 0)}
	timeout := func(d time.Duration) []transport.Option {
		return append([]transport.Option{transport.WithPerAttemptTimeout(d)}, quick...)
	}
	tests := []struct {
		name  string
		steps []http.HandlerFunc
		opts  []transport.Option
		ctx   time.Duration // caller's deadline; 0 means 30s
		check func(t *testing.T, o chaosOutcome)
	}{
		{"reset before headers on every attempt", []http.HandlerFunc{resetBeforeHeaders}, quick, 0,
			func(t *testing.T, o chaosOutcome) {
				giveUpAfter(t, o.err, 3)
				if !connBroken(o.err) || o.hits != 3 {
					t.Fatalf("err = %v after %d hits, want a broken connection after 3", o.err, o.hits)
				}
			}},
		{"reset before headers, then success", []http.HandlerFunc{resetBeforeHeaders, answerOK}, quick, 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.resp.StatusCode != 200 || o.body != okBody || o.hits != 2 {
					t.Fatalf("got %v %q after %d hits, want 200 %q after 2", o.err, o.body, o.hits, okBody)
				}
			}},
		{"reset mid-body", []http.HandlerFunc{partialResponse(headersIn)}, append([]transport.Option{closeOnEnd(headersIn)}, quick...), 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.resp.StatusCode != 200 || o.hits != 1 {
					t.Fatalf("got %v after %d hits, want the 200 headers from one attempt: a body is never retried", o.err, o.hits)
				}
				if !connBroken(o.readErr) || len(o.body) >= 1000 {
					t.Fatalf("reading the body: %d bytes, err %v; want fewer than promised and a broken connection", len(o.body), o.readErr)
				}
				if len(o.closed) != 1 || o.closed[0].Err == nil {
					t.Fatalf("OnResultDone %+v, want one event carrying the read error", o.closed)
				}
			}},
		{"truncated body", []http.HandlerFunc{partialResponse(nil)}, quick, 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.hits != 1 {
					t.Fatalf("got %v after %d hits, want the headers from one attempt", o.err, o.hits)
				}
				if !errors.Is(o.readErr, io.ErrUnexpectedEOF) || len(o.body) != 100 {
					t.Fatalf("reading the body: %d bytes, err %v; want 100 and io.ErrUnexpectedEOF", len(o.body), o.readErr)
				}
			}},
		{"slow headers beyond the per-attempt timeout are retried",
			[]http.HandlerFunc{hangUntilGone(&gone), hangUntilGone(&gone), answerOK}, timeout(500 * time.Millisecond), 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.body != okBody || o.hits != 3 {
					t.Fatalf("got %v %q after %d hits, want the third attempt's answer", o.err, o.body, o.hits)
				}
				if !waitCount(o.gone, 2) {
					t.Fatalf("server saw %d abandoned attempts, want the 2 timed out", o.gone.Load())
				}
			}},
		{"slow headers on every attempt", []http.HandlerFunc{hangUntilGone(&gone)}, timeout(300 * time.Millisecond), 0,
			func(t *testing.T, o chaosOutcome) {
				giveUpAfter(t, o.err, 3)
				if !errors.Is(o.err, transport.ErrAttemptTimeout) || o.hits != 3 {
					t.Fatalf("err = %v after %d hits, want ErrAttemptTimeout after 3", o.err, o.hits)
				}
			}},
		{"slow body is not cut off by the per-attempt timeout", []http.HandlerFunc{slowBody(time.Second)}, timeout(200 * time.Millisecond), 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.readErr != nil || o.body != "part1part2" || o.hits != 1 {
					t.Fatalf("got %v, body %q (read err %v) after %d hits; want the whole body from one attempt", o.err, o.body, o.readErr, o.hits)
				}
			}},
		{"503 on every attempt returns the last 503", []http.HandlerFunc{answerStatus(503)}, quick, 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.resp.StatusCode != 503 || o.body != "status 503" || o.hits != 3 {
					t.Fatalf("got %v %q after %d hits, want the third 503 and its body", o.err, o.body, o.hits)
				}
			}},
		{"429 with Retry-After 0 storm", []http.HandlerFunc{answerStatus(429, "Retry-After", "0")}, quick, 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.resp.StatusCode != 429 || o.hits != 3 || o.end.Backoff != 0 {
					t.Fatalf("got %v %d after %d hits, slept %v; want 429 after 3 with no sleep", o.err, o.resp.StatusCode, o.hits, o.end.Backoff)
				}
			}},
		{"Retry-After beyond the cap returns the 429", []http.HandlerFunc{answerStatus(429, "Retry-After", "3600")}, quick, 0,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.resp.StatusCode != 429 || o.hits != 1 || o.end.Reason != resilience.ReasonRetryAfterTooLong {
					t.Fatalf("got %v after %d hits, reason %v; want the 429 at once", o.err, o.hits, o.end.Reason)
				}
			}},
		{"Retry-After past the deadline returns the 503", []http.HandlerFunc{answerStatus(503, "Retry-After", "20")}, quick, 10 * time.Second,
			func(t *testing.T, o chaosOutcome) {
				if o.err != nil || o.resp.StatusCode != 503 || o.hits != 1 || o.end.Reason != resilience.ReasonPastDeadline {
					t.Fatalf("got %v after %d hits, reason %v; want the 503 at once", o.err, o.hits, o.end.Reason)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gone.Store(0)
			s := newFaultServer(t, false, tc.steps...)
			o := chaosRoundTrip(t, s, http.MethodGet, tc.ctx, tc.opts...)
			o.gone = &gone
			tc.check(t, o)
		})
	}
}

// chaosRoundTrip sends one request through a transport over a ledger to s,
// reads and closes the body, and checks that every response body the base
// handed out was closed.
func chaosRoundTrip(t *testing.T, s *faultServer, method string, deadline time.Duration, opts ...transport.Option) chaosOutcome {
	t.Helper()
	l := newLedger(s.base(t))
	var o chaosOutcome
	var mu sync.Mutex
	opts = append(opts, transport.WithHooks(transport.Hooks{
		OnCallEnd:    func(e resilience.CallEndEvent) { o.end = e },
		OnResultDone: func(e resilience.ResultDoneEvent) { mu.Lock(); o.closed = append(o.closed, e); mu.Unlock() },
	}))
	tr := transport.New(l, opts...)
	if deadline == 0 {
		deadline = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+"/chaos", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	o.resp, o.err = tr.RoundTrip(req)
	if (o.resp == nil) == (o.err == nil) {
		t.Fatalf("RoundTrip returned resp=%v and err=%v: exactly one must be set", o.resp, o.err)
	}
	if o.resp != nil {
		b, err := io.ReadAll(o.resp.Body)
		o.body, o.readErr = string(b), err
		o.resp.Body.Close()
	}
	l.waitBalanced(t)
	o.hits = s.count()
	mu.Lock()
	o.closed = append([]resilience.ResultDoneEvent(nil), o.closed...)
	mu.Unlock()
	return o
}

// TestChaosServerClosesIdleConnections: a server that drops idle keep-alive
// connections (and one that never keeps them) costs the caller nothing.
func TestChaosServerClosesIdleConnections(t *testing.T) {
	noLeaksAfter(t)
	tests := []struct {
		name      string
		configure func(*http.Server)
		pause     time.Duration
	}{
		{"idle timeout shorter than the pause", func(s *http.Server) { s.IdleTimeout = 20 * time.Millisecond }, 80 * time.Millisecond},
		{"idle timeout about the pause", func(s *http.Server) { s.IdleTimeout = 30 * time.Millisecond }, 30 * time.Millisecond},
		{"keep-alives off", func(s *http.Server) { s.SetKeepAlivesEnabled(false) }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(answerOK))
			tc.configure(srv.Config)
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			b := &http.Transport{}
			t.Cleanup(b.CloseIdleConnections)
			l := newLedger(b)
			tr := transport.New(l, transport.WithBackoff(resilience.Constant(0)))
			const n = 12
			for i := range n {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(body) != okBody {
					t.Fatalf("request %d: body %q, err %v", i, body, err)
				}
				time.Sleep(tc.pause)
			}
			l.waitBalanced(t)
			if c := conns.Load(); c < 2 {
				t.Fatalf("server saw %d connections for %d requests: it never closed one, the test proves nothing", c, n)
			}
		})
	}
}

// TestChaos429StormIsBoundedByTheBudget: many callers hammered by 429s get
// the 429 back, and the budget caps the retries they add.
func TestChaos429StormIsBoundedByTheBudget(t *testing.T) {
	noLeaksAfter(t)
	s := newFaultServer(t, false, answerStatus(429, "Retry-After", "0"))
	l := newLedger(s.base(t))
	var refused atomic.Int32
	const callers = 30
	tr := transport.New(l, transport.WithMaxAttempts(5), transport.WithRetryBudget(0.1, 5),
		transport.WithHooks(transport.Hooks{OnBudgetExhausted: func(resilience.BudgetEvent) { refused.Add(1) }}))
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Errorf("err = %v, want the 429", err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 429 || string(body) != "status 429" {
				t.Errorf("got %d %q, want the 429 and its body", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	l.waitBalanced(t)
	// Each second: 5 from the floor; over the test: 10% of 30 requests.
	// Allow the floor of two seconds, in case the storm straddles one.
	limit := callers + callers/10 + 2*5
	if h := s.count(); h < callers || h > limit {
		t.Fatalf("server saw %d hits from %d callers, want between %d and %d", h, callers, callers, limit)
	}
	if refused.Load() == 0 {
		t.Fatal("the budget never refused a retry in a 429 storm")
	}
}

func TestChaosHTTP2(t *testing.T) {
	noLeaksAfter(t)
	quick := []transport.Option{transport.WithBackoff(resilience.Constant(0)), transport.WithRetryBudget(0, 0)}
	t.Run("503 then success over HTTP/2", func(t *testing.T) {
		s := newFaultServer(t, true, answerStatus(503), answerOK)
		o := chaosRoundTrip(t, s, http.MethodGet, 0, quick...)
		if o.err != nil || o.resp.ProtoMajor != 2 || o.body != okBody || o.hits != 2 {
			t.Fatalf("got %v proto %d %q after %d hits, want HTTP/2 %q after 2", o.err, o.resp.ProtoMajor, o.body, o.hits, okBody)
		}
	})
	t.Run("stream reset by the handler", func(t *testing.T) {
		s := newFaultServer(t, true, func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }, answerOK)
		o := chaosRoundTrip(t, s, http.MethodGet, 0, quick...)
		// The panic resets the stream (RST_STREAM INTERNAL_ERROR), HTTP/2's
		// way of closing the connection mid-response: a GET is retried.
		if o.err != nil || o.body != okBody || o.hits != 2 {
			t.Fatalf("got %v %q after %d hits, want the retry's answer after 2", o.err, o.body, o.hits)
		}
	})
	t.Run("hedge wins and the losing stream is cancelled", func(t *testing.T) {
		var gone atomic.Int32
		s := newFaultServer(t, true, hangUntilGone(&gone), answerOK)
		o := chaosRoundTrip(t, s, http.MethodGet, 0, append(quick, transport.WithHedging(50*time.Millisecond, 1))...)
		if o.err != nil || o.body != okBody || o.hits != 2 || o.end.Hedges != 1 {
			t.Fatalf("got %v %q after %d hits and %d hedges, want the hedge's answer", o.err, o.body, o.hits, o.end.Hedges)
		}
		if !waitCount(&gone, 1) {
			t.Fatal("the losing stream was never cancelled on the server")
		}
	})
	t.Run("GOAWAY from a shutdown lets the request in flight finish, then refuses", func(t *testing.T) {
		release := make(chan struct{})
		arrived := make(chan struct{}, 1)
		// Only the first request waits; a later one that races the
		// shutdown onto the old connection is answered at once.
		s := newFaultServer(t, true, func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			answerOK(w, r)
		}, answerOK)
		l := newLedger(s.base(t))
		tr := transport.New(l, quick...)
		done := make(chan chaosOutcome, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
			resp, err := tr.RoundTrip(req)
			o := chaosOutcome{resp: resp, err: err}
			if resp != nil {
				b, err := io.ReadAll(resp.Body)
				o.body, o.readErr = string(b), err
				resp.Body.Close()
			}
			done <- o
		}()
		within(t, arrived, "the first request to arrive")
		shut := make(chan error, 1)
		go func() { shut <- s.Config.Shutdown(context.Background()) }()
		// Shutdown closes the listener at once and sends GOAWAY; a new
		// request cannot connect.
		deadline := time.Now().Add(10 * time.Second)
		var err error
		for {
			req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
			var resp *http.Response
			resp, err = tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if err != nil || time.Now().After(deadline) {
				break
			}
		}
		giveUpAfter(t, err, 3)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("after GOAWAY and listener close: %v, want connection refused", err)
		}
		close(release)
		o := within(t, done, "the request in flight to finish")
		if o.err != nil || o.readErr != nil || o.body != okBody {
			t.Fatalf("the request in flight during GOAWAY: %v %q (read %v), want it to finish", o.err, o.body, o.readErr)
		}
		if err := within(t, shut, "Shutdown"); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		l.waitBalanced(t)
	})
	t.Run("server closes the connection under a request in flight", func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		s := newFaultServer(t, true, func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			<-r.Context().Done()
		}, answerOK)
		go func() {
			select {
			case <-arrived:
				s.CloseClientConnections()
			case <-time.After(20 * time.Second):
			}
		}()
		o := chaosRoundTrip(t, s, http.MethodGet, 0, quick...)
		if o.err != nil || o.body != okBody || o.hits != 2 {
			t.Fatalf("got %v %q after %d hits, want the retry on a new connection to answer", o.err, o.body, o.hits)
		}
	})
}
