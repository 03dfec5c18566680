package transport_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/MrVSiK/gotry/transport"
)

// hopServer is a loopback server that counts its requests and the
// RetriesLeftHeader values they carried.
type hopServer struct {
	*httptest.Server
	hits atomic.Int32
	mu   sync.Mutex
	left []string // RetriesLeftHeader of each request, in order
}

func newHopServer(t *testing.T, h http.Handler) *hopServer {
	s := &hopServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.left = append(s.left, r.Header.Get(transport.RetriesLeftHeader))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hopServer) lefts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.left)
}

// down answers every request with a 503.
var down = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "down", http.StatusServiceUnavailable)
})

// service is a handler, wrapped in Middleware, that calls next through a
// gotry Transport (no backoff, no budget: these tests count attempts) with
// the incoming request's context, and answers with next's status.
func service(t *testing.T, next string) http.Handler {
	return transport.Middleware(unwrappedService(t, next))
}

// unwrappedService is service without Middleware.
func unwrappedService(t *testing.T, next string) http.Handler {
	tr := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
}

// TestMiddlewareRetriesBelowOnlyOnTheCallersLastAttempt: a service whose
// caller says it will retry makes one attempt per call below, and tells the
// next hop that a retry will come from above; on the caller's last attempt,
// or without the header, it retries as usual, counting its attempts down.
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
// decimal in 0..1000 is ignored, and the service retries as it would
// without the header.
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
// still fails says so, and the caller's Transport does not retry it; a
// service without Middleware is retried, and the attempts multiply.
func TestPushbackStopsTheCallersRetries(t *testing.T) {
	tests := []struct {
		name              string
		middleware        bool
		wantSvc, wantLeaf int32
	}{
		{"with Middleware: the service pushes back", true, 1, 3},
		{"without: three attempts of three", false, 3, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, down)
			h := unwrappedService(t, leaf.URL)
			if tc.middleware {
				h = transport.Middleware(h)
			}
			svc := newHopServer(t, h)
			client := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
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

// TestPushbackHonouredOnlyWhenWellFormed: a Transport does not retry an
// answer that carries PushbackHeader with its one value (case and spaces
// aside); any other value, or a repeated header, is ignored, and a
// pushback on an answer that would not be retried changes nothing.
func TestPushbackHonouredOnlyWhenWellFormed(t *testing.T) {
	tests := []struct {
		name   string
		status int
		values []string
		want   int32
	}{
		{"retried-below", 503, []string{"retried-below"}, 1},
		{"case and spaces", 503, []string{" Retried-Below "}, 1},
		{"on a 429", 429, []string{"retried-below"}, 1},
		{"unknown value", 503, []string{"please"}, 3},
		{"empty", 503, []string{""}, 3},
		{"repeated", 503, []string{"retried-below", "retried-below"}, 3},
		{"on a success", 200, []string{"retried-below"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHopServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header()[transport.PushbackHeader] = tc.values
				w.WriteHeader(tc.status)
			}))
			client := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
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
			tr := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
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
// Middleware the leaf sees 3 × 3 × 3 = 27 attempts a request; with it on A
// and B (the client, outside any service, sends no header), A retries, B
// retries only on A's last attempt, and A's pushback stops the client's
// retries: 2 + 3 = 5.
func TestChainAttemptsAddUp(t *testing.T) {
	tests := []struct {
		name       string
		middleware bool
		wantLeaf   int32
	}{
		{"with Middleware", true, 5},
		{"without", false, 27},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wrap := func(h http.Handler) http.Handler { return h }
			if tc.middleware {
				wrap = transport.Middleware
			}
			leaf := newHopServer(t, down)
			b := httptest.NewServer(wrap(unwrappedService(t, leaf.URL)))
			t.Cleanup(b.Close)
			a := httptest.NewServer(wrap(unwrappedService(t, b.URL)))
			t.Cleanup(a.Close)
			client := transport.New(newBase(t), noDelay, transport.WithRetryBudget(0, 0))
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
