package transport_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// roundTripperFunc adapts a function to http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// fakeStart is a whole second, so HTTP-date Retry-After values are exact.
var fakeStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// wait is how long a test waits for something that must happen; it is a
// timeout for a failing test, never a synchronisation device.
const wait = 10 * time.Second

// noDelay removes backoff sleeps from tests that do not look at them.
var noDelay = transport.WithBackoff(resilience.Constant(0))

func newClock() *fakeclock.Clock { return fakeclock.New(fakeStart) }

// waitArmed waits until fc has armed n timers in total.
func waitArmed(t *testing.T, fc *fakeclock.Clock, n int) {
	t.Helper()
	if !fc.WaitForArmed(n, wait) {
		t.Fatalf("timers armed: got %d, want at least %d", fc.Armed(), n)
	}
}

// recv receives from ch or fails the test.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// result is what a RoundTrip returned.
type result struct {
	resp *http.Response
	err  error
}

// goRoundTrip runs RoundTrip on its own goroutine.
func goRoundTrip(rt http.RoundTripper, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		ch <- result{resp, err}
	}()
	return ch
}

// testCtx returns a context cancelled when the test ends, so a stuck
// RoundTrip in a failing test is released.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func newRequest(t *testing.T, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// readBody reads and closes resp.Body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	return string(b)
}

// closeResp closes resp's body when there is one.
func closeResp(r result) {
	if r.resp != nil {
		r.resp.Body.Close()
	}
}

// newBase returns a fresh http.Transport whose idle connections are closed
// when the test ends.
func newBase(t *testing.T) *http.Transport {
	b := &http.Transport{}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// script is an httptest server that answers its nth request with steps[n-1]
// (the last step repeats). It reads and records every request body before
// the step runs, and reports each arrival on arrived.
type script struct {
	*httptest.Server
	hits    atomic.Int32
	arrived chan int

	mu      sync.Mutex
	bodies  []string
	headers []http.Header
}

func newScript(t *testing.T, steps ...http.HandlerFunc) *script {
	s := &script{arrived: make(chan int, 256)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		n := int(s.hits.Add(1))
		s.arrived <- n
		steps[min(n, len(steps))-1](w, r)
	}))
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

func (s *script) count() int { return int(s.hits.Load()) }

func (s *script) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func (s *script) receivedHeaders() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// reply answers with code, header pairs and body "reply <code>".
func reply(code int, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, "reply "+strconv.Itoa(code))
	}
}

// replyN answers with code and body "attempt <n>".
func replyN(code int) http.HandlerFunc {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		io.WriteString(w, "attempt "+strconv.Itoa(int(n.Add(1))))
	}
}

// hijackClose reads the request and closes the connection without a reply.
func hijackClose(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// hijackReset reads the request and resets the connection (RST).
func hijackReset(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// hang blocks until the client gives up on the request, then reports it.
func hang(gone chan<- int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		gone <- 1
	}
}

// callerBody is a request body that records Close and reads.
type callerBody struct {
	r      io.Reader
	reads  atomic.Int32
	closes atomic.Int32
}

func newCallerBody(r io.Reader) *callerBody { return &callerBody{r: r} }

func (b *callerBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.r.Read(p)
}

func (b *callerBody) Close() error {
	b.closes.Add(1)
	return nil
}

// watchedBody is a response body that records how much was read and whether
// it was closed.
type watchedBody struct {
	rc     io.ReadCloser
	read   atomic.Int64
	closes atomic.Int32
	closed chan struct{}
	once   sync.Once
}

func watch(rc io.ReadCloser) *watchedBody { return &watchedBody{rc: rc, closed: make(chan struct{})} }

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *watchedBody) Close() error {
	b.closes.Add(1)
	b.once.Do(func() { close(b.closed) })
	return b.rc.Close()
}

// attemptLog wraps a base transport and records every attempt's request and
// response body.
type attemptLog struct {
	base http.RoundTripper

	mu     sync.Mutex
	reqs   []*http.Request
	bodies []*watchedBody
}

func (l *attemptLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
	resp, err := l.base.RoundTrip(r)
	if resp != nil {
		wb := watch(resp.Body)
		resp.Body = wb
		l.mu.Lock()
		l.bodies = append(l.bodies, wb)
		l.mu.Unlock()
	}
	return resp, err
}

func (l *attemptLog) requests() []*http.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*http.Request(nil), l.reqs...)
}

func (l *attemptLog) responseBodies() []*watchedBody {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*watchedBody(nil), l.bodies...)
}

// fakeResponse is a response for roundTripperFunc bases.
func fakeResponse(r *http.Request, code int, body string, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

// errReset is a retryable connection error, as the dialer reports it.
var errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

// events collects hook events safely across goroutines.
type events[E any] struct {
	mu sync.Mutex
	es []E
}

func (e *events[E]) add(v E) {
	e.mu.Lock()
	e.es = append(e.es, v)
	e.mu.Unlock()
}

func (e *events[E]) get() []E {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]E(nil), e.es...)
}

// breakerState returns host's breaker state from tr's Stats (closed when
// the host has no breaker).
func breakerState(tr *transport.Transport, host string) resilience.BreakerState {
	h, _ := tr.Stats().Host(host)
	return h.Breaker
}
