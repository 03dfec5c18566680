package transport_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The hop protocol's documented trusted set-up, on loopback: Middleware
// trusts callers from loopback addresses, and every Transport takes the
// loopback hosts for peers.
var (
	loopback      = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	trustLoopback = transport.WithTrustedCallers(transport.CallersFrom(loopback...))
	loopbackPeers = transport.WithHopPeers(func(host string) bool { return host == "127.0.0.1" || host == "::1" })
)

// hopServer is a loopback server that counts its requests and the
// RetriesLeftHeader values they carried.
type hopServer struct {
	*httptest.Server
	hits atomic.Int32
	mu   sync.Mutex
	left []string      // RetriesLeftHeader of each request, in order
	hdrs []http.Header // each request's headers
}

func newHopServer(t *testing.T, h http.Handler) *hopServer {
	s := &hopServer{}
	s.Server = httptest.NewServer(s.recording(h))
	t.Cleanup(s.Close)
	return s
}

// recording is h after counting the request and keeping its headers.
func (s *hopServer) recording(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.left = append(s.left, r.Header.Get(transport.RetriesLeftHeader))
		s.hdrs = append(s.hdrs, r.Header.Clone())
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (s *hopServer) lefts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.left)
}

// headers returns key's value in each request, in order ("-" where absent).
func (s *hopServer) headers(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, h := range s.hdrs {
		v, ok := h[key]
		switch {
		case !ok:
			out = append(out, "-")
		default:
			out = append(out, strings.Join(v, ","))
		}
	}
	return out
}

// down answers every request with a 503.
var down = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "down", http.StatusServiceUnavailable)
})

// service is a handler, wrapped in Middleware trusting loopback callers,
// that calls next through a gotry Transport taking loopback hosts for
// peers (no backoff, no budget: these tests count attempts) with the
// incoming request's context, and answers with next's status.
func service(t *testing.T, next string) http.Handler {
	return transport.Middleware(unwrappedService(t, next), trustLoopback)
}

// unwrappedService is service without Middleware.
func unwrappedService(t *testing.T, next string, opts ...transport.Option) http.Handler {
	opts = append([]transport.Option{noDelay, transport.WithRetryBudget(0, 0), loopbackPeers}, opts...)
	return relay(t, transport.New(newBase(t), opts...), next, nil)
}

// relay is a service's handler: it GETs next through tr with the incoming
// request's context and answers with the status it got (502 on an error).
// prepare, if not nil, sees the incoming request and may change the
// outgoing one first.
func relay(t *testing.T, tr http.RoundTripper, next string, prepare func(in, out *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		if prepare != nil {
			prepare(r, req)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		readBody(t, resp)
		w.WriteHeader(resp.StatusCode)
	})
}

// peerClient is a gotry client of the chain: loopback hosts are its peers.
func peerClient(t *testing.T, opts ...transport.Option) *transport.Transport {
	opts = append([]transport.Option{noDelay, transport.WithRetryBudget(0, 0), loopbackPeers}, opts...)
	return transport.New(newBase(t), opts...)
}

// TestMiddlewareRetriesBelowOnlyOnTheCallersLastAttempt: a service whose
// trusted caller says it will retry makes one attempt per call below, and
// tells the next hop that a retry will come from above; on the caller's
// last attempt, or without the header, it retries as usual, counting its
// attempts down.
func TestMiddlewareRetriesBelowOnlyOnTheCallersLastAttempt(t *testing.T) {
	tests := []struct {
		name      string
		header    []string // RetriesLeftHeader values sent to the service
		wantLeaf  int
		wantLefts []string // RetriesLeftHeader the leaf saw
	}{
		{"the caller will retry twice more", []string{"2"}, 1, []string{"2"}},
		{"the caller's last attempt", []string{"0"}, 3, []string{"2", "1", "0"}},
		{"no header", nil, 3, []string{"2", "1", "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, down)
			svc := httptest.NewServer(service(t, leaf.URL))
			t.Cleanup(svc.Close)
			req := newRequest(t, testCtx(t), http.MethodGet, svc.URL, nil)
			req.Header[transport.RetriesLeftHeader] = tc.header
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := int(leaf.hits.Load()); got != tc.wantLeaf {
				t.Errorf("leaf saw %d attempts, want %d", got, tc.wantLeaf)
			}
			if got := leaf.lefts(); !slices.Equal(got, tc.wantLefts) {
				t.Errorf("leaf saw %s %q, want %q", transport.RetriesLeftHeader, got, tc.wantLefts)
			}
		})
	}
}

// TestMiddlewareIgnoresMalformedRetriesLeft: a value that is not one
// decimal in 0..1000 is ignored, even from a trusted caller, and the
// service retries as it would without the header.
func TestMiddlewareIgnoresMalformedRetriesLeft(t *testing.T) {
	for _, v := range [][]string{{"abc"}, {"-1"}, {"+2"}, {"1 2"}, {"0x2"}, {"1001"}, {"99999999999999999999"}, {""}, {"1", "2"}} {
		t.Run(v[0], func(t *testing.T) {
			leaf := newHopServer(t, down)
			svc := httptest.NewServer(service(t, leaf.URL))
			t.Cleanup(svc.Close)
			req := newRequest(t, testCtx(t), http.MethodGet, svc.URL, nil)
			req.Header[transport.RetriesLeftHeader] = v
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := leaf.hits.Load(); got != 3 {
				t.Errorf("%s %q: leaf saw %d attempts, want 3 (the header ignored)", transport.RetriesLeftHeader, v, got)
			}
		})
	}
}

// TestPushbackStopsTheCallersRetries: a service that retried below and
// still fails says so, and the caller's Transport, for which the service
// is a peer, does not retry it (the service here trusts no caller, as an
// edge service would, so it retries whatever its caller sends); without
// Middleware, or for a caller that does not take the service for a peer,
// the attempts multiply.
func TestPushbackStopsTheCallersRetries(t *testing.T) {
	tests := []struct {
		name              string
		middleware        bool
		peer              bool
		wantSvc, wantLeaf int32
	}{
		{"with Middleware, the service a peer: it pushes back", true, true, 1, 3},
		{"with Middleware, the service no peer: the pushback is ignored", true, false, 3, 9},
		{"without: three attempts of three", false, true, 3, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, down)
			h := unwrappedService(t, leaf.URL)
			if tc.middleware {
				h = transport.Middleware(h) // trusts no caller
			}
			svc := newHopServer(t, h)
			client := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
			if tc.peer {
				client = peerClient(t)
			}
			resp, err := client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, svc.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", resp.StatusCode)
			}
			if got := svc.hits.Load(); got != tc.wantSvc {
				t.Errorf("service saw %d attempts, want %d", got, tc.wantSvc)
			}
			if got := leaf.hits.Load(); got != tc.wantLeaf {
				t.Errorf("leaf saw %d attempts, want %d", got, tc.wantLeaf)
			}
		})
	}
}

// TestPushbackHonouredOnlyWhenWellFormedFromAPeer: a Transport does not
// retry an answer from a peer that carries PushbackHeader with its one
// value (case and spaces aside), when the built-in rules decided it; any
// other value, a repeated header, a host that is no peer, pushback turned
// off, or a classifier's own Retry or Throttled, and the answer is retried;
// a pushback on an answer that would not be retried changes nothing.
func TestPushbackHonouredOnlyWhenWellFormedFromAPeer(t *testing.T) {
	retry := transport.WithClassifier(func(transport.Attempt) transport.Decision { return transport.Retry })
	throttled := transport.WithClassifier(func(transport.Attempt) transport.Decision { return transport.Throttled })
	deflt := transport.WithClassifier(func(transport.Attempt) transport.Decision { return transport.Default })
	noPeers := transport.WithHopPeers(nil)
	tests := []struct {
		name   string
		status int
		values []string
		opts   []transport.Option
		want   int32
	}{
		{"retried-below", 503, []string{"retried-below"}, nil, 1},
		{"case and spaces", 503, []string{" Retried-Below "}, nil, 1},
		{"on a 429", 429, []string{"retried-below"}, nil, 1},
		{"a classifier's Default", 503, []string{"retried-below"}, []transport.Option{deflt}, 1},
		{"unknown value", 503, []string{"please"}, nil, 3},
		{"empty", 503, []string{""}, nil, 3},
		{"repeated", 503, []string{"retried-below", "retried-below"}, nil, 3},
		{"on a success", 200, []string{"retried-below"}, nil, 1},
		{"from a host that is no peer", 503, []string{"retried-below"}, []transport.Option{noPeers}, 3},
		{"WithPushback(false)", 503, []string{"retried-below"}, []transport.Option{transport.WithPushback(false)}, 3},
		{"a classifier's Retry", 503, []string{"retried-below"}, []transport.Option{retry}, 3},
		{"a classifier's Throttled", 503, []string{"retried-below"}, []transport.Option{throttled}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHopServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header()[transport.PushbackHeader] = tc.values
				w.WriteHeader(tc.status)
			}))
			client := peerClient(t, tc.opts...)
			resp, err := client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := srv.hits.Load(); got != tc.want {
				t.Errorf("server saw %d attempts, want %d", got, tc.want)
			}
		})
	}
}

// TestMiddlewarePushesBackOnlyFailures: the pushback goes on an answer of
// 500 and up or 429 when a call below retried, on no other.
func TestMiddlewarePushesBackOnlyFailures(t *testing.T) {
	tests := []struct {
		name    string
		retried bool
		status  int
		want    bool
	}{
		{"retried, 503", true, 503, true},
		{"retried, 500", true, 500, true},
		{"retried, 429", true, 429, true},
		{"retried, 200", true, 200, false},
		{"retried, 404", true, 404, false},
		{"no retry below, 503", false, 503, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retried && r.Header.Get(transport.RetriesLeftHeader) == "2" {
					down(w, r) // the first attempt fails, so the service retries
				}
			}))
			tr := peerClient(t)
			svc := httptest.NewServer(transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, leaf.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				readBody(t, resp)
				w.WriteHeader(tc.status)
			})))
			t.Cleanup(svc.Close)
			resp, err := http.DefaultTransport.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, svc.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := resp.Header.Get(transport.PushbackHeader) == transport.PushbackRetried; got != tc.want {
				t.Errorf("pushback %v, want %v", got, tc.want)
			}
		})
	}
}

// TestChainAttemptsAddUp: client → A → B → leaf, every hop a gotry
// Transport of 3 attempts with no budget, the leaf down. Without
// Middleware the leaf sees 3 × 3 × 3 = 27 attempts a request, and so it
// does with Middleware's defaults, which trust no caller and take no host
// for a peer. In the trusted set-up every layer that retries adds two: the
// client's first two attempts go down the chain once each, and on its last
// A retries, and on A's last B does: 2 + 2 + 3 = 7. With A an edge that
// trusts no caller, A retries, B only on A's last attempt, and A's
// pushback stops the client's retries: 2 + 3 = 5.
func TestChainAttemptsAddUp(t *testing.T) {
	tests := []struct {
		name     string
		wrapA    func(http.Handler) http.Handler
		wrapB    func(http.Handler) http.Handler
		peers    bool
		wantLeaf int32
	}{
		{"without Middleware", nil, nil, true, 27},
		{"Middleware with its defaults, no peers", plainMiddleware, plainMiddleware, false, 27},
		{"the trusted set-up", trustedMiddleware, trustedMiddleware, true, 7},
		{"A an edge that trusts no caller", plainMiddleware, trustedMiddleware, true, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wrap := func(f func(http.Handler) http.Handler, h http.Handler) http.Handler {
				if f == nil {
					return h
				}
				return f(h)
			}
			var opts []transport.Option
			if !tc.peers {
				opts = append(opts, transport.WithHopPeers(nil))
			}
			leaf := newHopServer(t, down)
			b := httptest.NewServer(wrap(tc.wrapB, unwrappedService(t, leaf.URL, opts...)))
			t.Cleanup(b.Close)
			a := httptest.NewServer(wrap(tc.wrapA, unwrappedService(t, b.URL, opts...)))
			t.Cleanup(a.Close)
			client := peerClient(t, opts...)
			resp, err := client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, a.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := leaf.hits.Load(); got != tc.wantLeaf {
				t.Errorf("leaf saw %d attempts for one request, want %d", got, tc.wantLeaf)
			}
		})
	}
}

func plainMiddleware(h http.Handler) http.Handler   { return transport.Middleware(h) }
func trustedMiddleware(h http.Handler) http.Handler { return transport.Middleware(h, trustLoopback) }

// TestMiddlewareWriterKeepsFlushAndUnwrap: the wrapped writer flushes and
// unwraps for http.ResponseController.
func TestMiddlewareWriterKeepsFlushAndUnwrap(t *testing.T) {
	var flushErr error
	var unwrapped bool
	h := transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		flushErr = rc.Flush()
		_, unwrapped = w.(interface{ Unwrap() http.ResponseWriter })
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if flushErr != nil || !rec.Flushed || !unwrapped {
		t.Errorf("Flush error %v, flushed %v, Unwrap %v; want nil, true, true", flushErr, rec.Flushed, unwrapped)
	}
}

// TestRetriesLeftTellsWhatTheSenderWillDo: RetriesLeftHeader is what the
// sender will actually do if the attempt fails, for every kind of request:
// a request it may not repeat says 0 (a POST whose body replays is still
// retried after a refused stream, which no answer is), as does one whose
// body cannot be sent again, or a Policy of one attempt; a Policy of two
// counts down from 1; a request marked idempotent counts down as a GET.
func TestRetriesLeftTellsWhatTheSenderWillDo(t *testing.T) {
	tests := []struct {
		name   string
		method string
		body   func() io.Reader
		key    bool // an Idempotency-Key
		policy *transport.Policy
		want   []string
	}{
		{"GET", http.MethodGet, nil, false, nil, []string{"2", "1", "0"}},
		{"POST, a body that replays", http.MethodPost, func() io.Reader { return strings.NewReader("x") }, false, nil, []string{"0"}},
		{"POST, no body", http.MethodPost, nil, false, nil, []string{"0"}},
		{"POST, a body that does not replay", http.MethodPost, func() io.Reader { return io.MultiReader(strings.NewReader("x")) }, false, nil, []string{"0"}},
		{"POST with an Idempotency-Key", http.MethodPost, func() io.Reader { return strings.NewReader("x") }, true, nil, []string{"2", "1", "0"}},
		{"PUT, a body too large to buffer", http.MethodPut, func() io.Reader { return io.MultiReader(strings.NewReader(strings.Repeat("x", 64))) }, false, nil, []string{"0"}},
		{"GET, Policy of two attempts", http.MethodGet, nil, false, &transport.Policy{MaxAttempts: 2}, []string{"1", "0"}},
		{"GET, NoRetry", http.MethodGet, nil, false, ptr(transport.NoRetry()), []string{"0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, down)
			client := peerClient(t, transport.WithMaxBufferedBody(16))
			ctx := testCtx(t)
			if tc.policy != nil {
				ctx = transport.WithPolicy(ctx, *tc.policy)
			}
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			req := newRequest(t, ctx, tc.method, leaf.URL, body)
			if tc.key {
				req.Header.Set("Idempotency-Key", "k1")
			}
			resp, err := client.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := leaf.lefts(); !slices.Equal(got, tc.want) {
				t.Errorf("%s %q, want %q", transport.RetriesLeftHeader, got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestRetriesLeftUnderATrustedCallersPromise: a POST made under a trusted
// caller that will retry carries the caller's promise, and gets one
// attempt: the request is sent again from above.
func TestRetriesLeftUnderATrustedCallersPromise(t *testing.T) {
	leaf := newHopServer(t, down)
	tr := peerClient(t)
	svc := httptest.NewServer(transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, leaf.URL, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Error(err)
			return
		}
		readBody(t, resp)
		w.WriteHeader(resp.StatusCode)
	}), trustLoopback))
	t.Cleanup(svc.Close)
	req := newRequest(t, testCtx(t), http.MethodGet, svc.URL, nil)
	req.Header.Set(transport.RetriesLeftHeader, "2")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if got := leaf.lefts(); !slices.Equal(got, []string{"2"}) {
		t.Errorf("leaf saw %s %q, want [2]", transport.RetriesLeftHeader, got)
	}
}

// TestHopHeadersOnlyToPeers: under Middleware, with a trusted caller's
// promise and deadline, a Transport sends the protocol's headers to a peer
// and none to a host that is no peer, not even when the handler copied its
// request's headers onto the call; a Transport with no peers sends none.
func TestHopHeadersOnlyToPeers(t *testing.T) {
	tests := []struct {
		name string
		opts []transport.Option
		want bool
	}{
		{"a peer", []transport.Option{loopbackPeers}, true},
		{"no peer", []transport.Option{transport.WithHopPeers(func(string) bool { return false })}, false},
		{"no peers configured", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			tr := transport.New(newBase(t), tc.opts...)
			svc := httptest.NewServer(transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, leaf.URL, nil)
				req.Header = r.Header.Clone() // a handler that forwards its request's headers
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				readBody(t, resp)
			}), trustLoopback))
			t.Cleanup(svc.Close)
			req := newRequest(t, testCtx(t), http.MethodGet, svc.URL, nil)
			req.Header.Set(transport.RetriesLeftHeader, "2")
			req.Header.Set(transport.TimeoutHeader, "60000")
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			left, timeout := leaf.headers(transport.RetriesLeftHeader), leaf.headers(transport.TimeoutHeader)
			if (left[0] != "-") != tc.want || (timeout[0] != "-") != tc.want {
				t.Errorf("leaf saw %s %q and %s %q; want both %v", transport.RetriesLeftHeader, left, transport.TimeoutHeader, timeout, tc.want)
			}
		})
	}
}

// TestTransportOutsideMiddlewareSendsNothingByDefault: a Transport with
// its defaults, under no Middleware, adds no header of the protocol.
func TestTransportOutsideMiddlewareSendsNothingByDefault(t *testing.T) {
	leaf := newHopServer(t, down)
	resp, err := transport.New(newBase(t), noDelay).RoundTrip(newRequest(t, testCtx(t), http.MethodGet, leaf.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	for _, key := range []string{transport.RetriesLeftHeader, transport.TimeoutHeader} {
		if got := leaf.headers(key); slices.ContainsFunc(got, func(v string) bool { return v != "-" }) {
			t.Errorf("leaf saw %s %q, want none", key, got)
		}
	}
}

// TestPushbackIsAFailureForTheBreaker: six 503s from a peer that carry
// pushback open a breaker of threshold 3, as six 503s without it do; a 429
// with pushback is a throttle still, which the breaker ignores.
func TestPushbackIsAFailureForTheBreaker(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   resilience.BreakerState
	}{
		{"503 with pushback", 503, resilience.BreakerOpen},
		{"500 with pushback, 500 retryable", 500, resilience.BreakerOpen},
		{"429 with pushback", 429, resilience.BreakerClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHopServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set(transport.PushbackHeader, transport.PushbackRetried)
				w.WriteHeader(tc.status)
			}))
			client := peerClient(t, transport.WithRetryableStatuses(500, 502, 503, 504),
				transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 3}))
			for range 6 {
				resp, err := client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
				if err == nil {
					readBody(t, resp)
				}
			}
			if got := breakerState(client, strings.TrimPrefix(srv.URL, "http://")); got != tc.want {
				t.Errorf("breaker %v after six answers (%d reached the server), want %v", got, srv.hits.Load(), tc.want)
			}
		})
	}
}

// TestPushbackIsNoSuccessForTheBudget: a 500 with pushback (retryable, as
// configured) does not refill the reserve the way a success does.
func TestPushbackIsNoSuccessForTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		want   float64
	}{
		{"500 with pushback", 500, 0},
		{"200", 200, 1 + transport.DefaultBudgetRatio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			var failing atomic.Bool
			failing.Store(true)
			srv := newHopServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if failing.Load() {
					w.WriteHeader(http.StatusBadGateway)
					return
				}
				w.Header().Set(transport.PushbackHeader, transport.PushbackRetried)
				w.WriteHeader(tc.status)
			}))
			client := transport.New(newBase(t), noDelay, loopbackPeers, transport.WithClock(fc),
				transport.WithRetryableStatuses(500, 502, 503, 504))
			resp, err := client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := client.Stats().BudgetTokens; got != 0 || srv.hits.Load() != 3 {
				t.Fatalf("after a failing request (%d attempts) the budget holds %v, want 3 attempts and 0", srv.hits.Load(), got)
			}
			failing.Store(false)
			fc.Advance(time.Second)
			resp, err = client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := client.Stats().BudgetTokens; got != tc.want {
				t.Errorf("budget holds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRetriesLeftWithHedging: each attempt of a hedging request tells the
// next hop the attempts that may still follow it: the first, 2; its hedge,
// 1 (one retry is left after it); the retry after both failed, 0. A POST
// without an idempotency key is never hedged, and says 0.
func TestRetriesLeftWithHedging(t *testing.T) {
	tests := []struct {
		name   string
		method string
		want   []string // "attempt: RetriesLeftHeader", in order of arrival
	}{
		{"GET", http.MethodGet, []string{"1; initial: 2", "2; hedge: 1", "3; retry: 0"}},
		{"POST", http.MethodPost, []string{"1; initial: 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hedged := make(chan struct{})
			var seen events[string]
			leaf := newHopServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				a := r.Header.Get("Gotry-Attempt")
				seen.add(a + ": " + r.Header.Get(transport.RetriesLeftHeader))
				switch {
				case a == "2; hedge":
					close(hedged)
				case a == "1; initial" && tc.method == http.MethodGet:
					select { // the first attempt fails once its hedge has arrived
					case <-hedged:
					case <-r.Context().Done():
					}
				}
				down(w, r)
			}))
			client := peerClient(t, transport.WithHedging(20*time.Millisecond, 1), transport.WithAttemptHeader("Gotry-Attempt"))
			resp, err := client.RoundTrip(newRequest(t, testCtx(t), tc.method, leaf.URL, strings.NewReader("x")))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if got := seen.get(); !slices.Equal(got, tc.want) {
				t.Errorf("leaf saw %q, want %q", got, tc.want)
			}
		})
	}
}
