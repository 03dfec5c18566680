package transport_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The hop protocol's trust model and its deadline header (issue #38).

// seen is what a handler under Middleware saw of its request.
type seen struct {
	called   bool
	deadline time.Time // zero: none
	header   http.Header
}

// serveOnce runs one request through Middleware with opts, from
// remoteAddr, carrying the given hop headers, and returns the answer and
// what the handler saw. parent, when set, is the request's context before
// Middleware.
func serveOnce(t *testing.T, remoteAddr string, hdr http.Header, parent context.Context, opts ...transport.Option) (*httptest.ResponseRecorder, seen) {
	t.Helper()
	var s seen
	h := transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called, s.header = true, r.Header.Clone()
		s.deadline, _ = r.Context().Deadline()
	}), opts...)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if parent != nil {
		req = req.WithContext(parent)
	}
	req.RemoteAddr = remoteAddr
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, s
}

// TestMiddlewareTimeoutFromATrustedCaller: a trusted caller's
// TimeoutHeader becomes the request context's deadline, on Middleware's
// clock, exactly; 0 is answered 504 with pushback at once, the handler
// not called; a value that is not one decimal of 1 to 8 digits, or a
// repeated header, is ignored; a deadline the context already has is
// never extended.
func TestMiddlewareTimeoutFromATrustedCaller(t *testing.T) {
	fc := newClock()
	now := fc.Now()
	tests := []struct {
		name     string
		values   []string
		parent   time.Duration // a deadline the request's context has already; 0 for none
		want     time.Duration // the handler's deadline from now; 0 for none
		answered bool          // 504 at once
	}{
		{"250 ms", []string{"250"}, 0, 250 * time.Millisecond, false},
		{"spaces around", []string{" 250 "}, 0, 250 * time.Millisecond, false},
		{"the minimum", []string{"1"}, 0, time.Millisecond, false},
		{"leading zeros", []string{"0007"}, 0, 7 * time.Millisecond, false},
		{"eight digits", []string{"99999999"}, 0, 99999999 * time.Millisecond, false},
		{"no time left", []string{"0"}, 0, 0, true},
		{"nine digits", []string{"100000000"}, 0, 0, false},
		{"negative", []string{"-5"}, 0, 0, false},
		{"a sign", []string{"+5"}, 0, 0, false},
		{"a fraction", []string{"1.5"}, 0, 0, false},
		{"a unit", []string{"10ms"}, 0, 0, false},
		{"hex", []string{"0x10"}, 0, 0, false},
		{"empty", []string{""}, 0, 0, false},
		{"repeated", []string{"250", "250"}, 0, 0, false},
		{"never extends the context's deadline", []string{"5000"}, 100 * time.Millisecond, 100 * time.Millisecond, false},
		{"shortens a later one", []string{"250"}, 10 * time.Second, 250 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var parent context.Context
			if tc.parent > 0 {
				ctx, cancel := context.WithDeadline(context.Background(), now.Add(tc.parent))
				t.Cleanup(cancel)
				parent = ctx
			}
			rec, s := serveOnce(t, "127.0.0.1:4321", http.Header{transport.TimeoutHeader: tc.values}, parent, trustLoopback, transport.WithClock(fc))
			if tc.answered {
				if s.called || rec.Code != http.StatusGatewayTimeout || rec.Header().Get(transport.PushbackHeader) != transport.PushbackRetried {
					t.Errorf("handler called %v, answer %d with pushback %q; want 504 with pushback at once", s.called, rec.Code, rec.Header().Get(transport.PushbackHeader))
				}
				return
			}
			var got time.Duration
			if !s.deadline.IsZero() {
				got = s.deadline.Sub(now)
			}
			if !s.called || got != tc.want {
				t.Errorf("handler called %v with a deadline %v from now, want %v", s.called, got, tc.want)
			}
		})
	}
}

// hostile is a request's hop headers from a caller that wants to turn a
// service's retries off or cut its deadline short.
var hostile = []struct {
	name string
	hdr  http.Header
}{
	{"retries off", http.Header{transport.RetriesLeftHeader: {"2"}}},
	{"retries off, at the maximum", http.Header{transport.RetriesLeftHeader: {"1000"}}},
	{"retries left 0", http.Header{transport.RetriesLeftHeader: {"0"}}},
	{"retries left huge", http.Header{transport.RetriesLeftHeader: {"99999999999999999999"}}},
	{"retries left repeated", http.Header{transport.RetriesLeftHeader: {"2", "2"}}},
	{"retries left malformed", http.Header{transport.RetriesLeftHeader: {"two"}}},
	{"no time left", http.Header{transport.TimeoutHeader: {"0"}}},
	{"a past deadline", http.Header{transport.TimeoutHeader: {"-1000"}}},
	{"1 ms", http.Header{transport.TimeoutHeader: {"1"}}},
	{"huge", http.Header{transport.TimeoutHeader: {"99999999999"}}},
	{"repeated", http.Header{transport.TimeoutHeader: {"1", "1"}}},
	{"malformed", http.Header{transport.TimeoutHeader: {"soon"}}},
	{"both", http.Header{transport.RetriesLeftHeader: {"2"}, transport.TimeoutHeader: {"1"}}},
}

// TestHostileHopHeadersChangeNothingUntrusted: a public endpoint behind
// Middleware with its defaults (it trusts no caller), or trusting its own
// network and called from outside it, answers a request carrying hostile
// hop headers as it answers one without: the handler gets no deadline
// and does not see the headers (so cannot forward them), and its call to
// a peer below, down, makes its three attempts with its own
// RetriesLeftHeader and no TimeoutHeader; the answer is the 503 with
// pushback of a service that retried, never a 504.
func TestHostileHopHeadersChangeNothingUntrusted(t *testing.T) {
	setups := []struct {
		name       string
		remoteAddr string
		opts       []transport.Option
	}{
		{"default trust", "127.0.0.1:4321", nil},
		{"trusting loopback, called from outside", "192.0.2.1:4321", []transport.Option{trustLoopback}},
	}
	for _, su := range setups {
		for _, hc := range append([]struct {
			name string
			hdr  http.Header
		}{{"no hop header", nil}}, hostile...) {
			t.Run(su.name+"/"+hc.name, func(t *testing.T) {
				leaf := newHopServer(t, down)
				tr := peerClient(t)
				var s seen
				h := transport.Middleware(relay(t, tr, leaf.URL, func(in, out *http.Request) {
					s.called, s.header = true, in.Header.Clone()
					s.deadline, _ = in.Context().Deadline()
					out.Header = in.Header.Clone() // a handler that forwards its headers
				}), su.opts...)
				req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(testCtx(t))
				req.RemoteAddr = su.remoteAddr
				for k, v := range hc.hdr {
					req.Header[k] = v
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(transport.PushbackHeader) != transport.PushbackRetried {
					t.Errorf("answer %d, pushback %q; want 503 with pushback", rec.Code, rec.Header().Get(transport.PushbackHeader))
				}
				if !s.called || !s.deadline.IsZero() || s.header.Get(transport.RetriesLeftHeader) != "" || s.header.Get(transport.TimeoutHeader) != "" {
					t.Errorf("handler called %v, deadline %v, headers %v; want called, no deadline, no hop header", s.called, s.deadline, s.header)
				}
				if got := leaf.lefts(); !slices.Equal(got, []string{"2", "1", "0"}) {
					t.Errorf("leaf saw %s %q, want the service's own [2 1 0]", transport.RetriesLeftHeader, got)
				}
				if got := leaf.headers(transport.TimeoutHeader); !slices.Equal(got, []string{"-", "-", "-"}) {
					t.Errorf("leaf saw %s %q, want none", transport.TimeoutHeader, got)
				}
			})
		}
	}
}

// TestTrustedCallerHopHeadersAsDocumented: the same headers from a trusted
// caller do what the protocol says, and no more: a promise of retries
// makes the call below one attempt; a time left of 0 is answered 504 at
// once; 1 ms becomes the handler's deadline; a malformed, repeated or
// out-of-range value is ignored.
func TestTrustedCallerHopHeadersAsDocumented(t *testing.T) {
	tests := []struct {
		name         string
		hdr          http.Header
		wantCode     int
		wantLeaf     int32
		wantDeadline bool
	}{
		{"retries off", http.Header{transport.RetriesLeftHeader: {"2"}}, 503, 1, false},
		{"retries left 0", http.Header{transport.RetriesLeftHeader: {"0"}}, 503, 3, false},
		{"retries left huge", http.Header{transport.RetriesLeftHeader: {"99999999999999999999"}}, 503, 3, false},
		{"retries left repeated", http.Header{transport.RetriesLeftHeader: {"2", "2"}}, 503, 3, false},
		{"no time left", http.Header{transport.TimeoutHeader: {"0"}}, 504, 0, false},
		{"a past deadline", http.Header{transport.TimeoutHeader: {"-1000"}}, 503, 3, false},
		{"huge", http.Header{transport.TimeoutHeader: {"99999999999"}}, 503, 3, false},
		{"a minute", http.Header{transport.TimeoutHeader: {"60000"}}, 503, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaf := newHopServer(t, down)
			tr := peerClient(t)
			var deadline bool
			front := httptest.NewServer(transport.Middleware(relay(t, tr, leaf.URL, func(in, _ *http.Request) {
				_, deadline = in.Context().Deadline()
			}), trustLoopback))
			t.Cleanup(front.Close)
			req := newRequest(t, testCtx(t), http.MethodGet, front.URL, nil)
			for k, v := range tc.hdr {
				req.Header[k] = v
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if resp.StatusCode != tc.wantCode || leaf.hits.Load() != tc.wantLeaf || deadline != tc.wantDeadline {
				t.Errorf("answer %d, %d leaf attempts, deadline %v; want %d, %d, %v", resp.StatusCode, leaf.hits.Load(), deadline, tc.wantCode, tc.wantLeaf, tc.wantDeadline)
			}
		})
	}
}

// TestCallersFrom: the predicate accepts a request whose peer address is
// in a prefix, an IPv4-mapped IPv6 address as its IPv4 address and a
// zoned address by its address, and nothing it cannot parse.
func TestCallersFrom(t *testing.T) {
	in := transport.CallersFrom(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("fe80::/10"), netip.Prefix{})
	tests := []struct {
		addr string
		want bool
	}{
		{"10.1.2.3:80", true},
		{"[::ffff:10.1.2.3]:80", true},
		{"[::1]:8080", true},
		{"[fe80::1%eth0]:80", true},
		{"11.0.0.1:80", false},
		{"192.0.2.1:1234", false},
		{"127.0.0.1:80", false},
		{"10.1.2.3", false}, // no port: not what net/http's server sets
		{"", false},
		{"pipe", false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.addr
		if got := in(r); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestTransportSendsItsTimeLeft: a Transport sends a peer the time left of
// its request's deadline, on its clock, rounded down to the millisecond,
// or its per-attempt timeout when that is sooner, on each attempt (a retry
// after a backoff sends what is left then); nothing without either, or
// when it is longer than the header holds; and it replaces a value the
// caller set.
func TestTransportSendsItsTimeLeft(t *testing.T) {
	tests := []struct {
		name       string
		deadline   time.Duration // from the fake clock's start; 0 for none
		perAttempt time.Duration
		callers    string // a TimeoutHeader the caller set
		want       []string
	}{
		{"a deadline", 300 * time.Millisecond, 0, "", []string{"300", "200"}},
		{"rounded down", 300*time.Millisecond + 900*time.Microsecond, 0, "", []string{"300", "200"}},
		{"a sooner per-attempt timeout", 300 * time.Millisecond, 150 * time.Millisecond, "", []string{"150", "150"}},
		{"a later per-attempt timeout", 300 * time.Millisecond, time.Second, "", []string{"300", "200"}},
		{"a per-attempt timeout alone", 0, 150 * time.Millisecond, "", []string{"150", "150"}},
		{"neither", 0, 0, "", []string{"-", "-"}},
		{"neither, the caller's own", 0, 0, "5", []string{"-", "-"}},
		{"a deadline, the caller's own", 300 * time.Millisecond, 0, "5", []string{"300", "200"}},
		{"longer than the header holds", 100_000_200 * time.Millisecond, 0, "", []string{"-", "-"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			var got events[string]
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				v, ok := r.Header[transport.TimeoutHeader]
				switch {
				case !ok:
					got.add("-")
				default:
					got.add(v[0])
				}
				return fakeResponse(r, 503, "down"), nil
			})
			opts := []transport.Option{loopbackPeers, transport.WithClock(fc), transport.WithMaxAttempts(2),
				transport.WithBackoff(resilience.Constant(100 * time.Millisecond)), transport.WithRetryBudget(0, 0)}
			if tc.perAttempt > 0 {
				opts = append(opts, transport.WithPerAttemptTimeout(tc.perAttempt))
			}
			tr := transport.New(base, opts...)
			ctx := testCtx(t)
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, fc.Now().Add(tc.deadline)) // 2030: never ends on the wall clock
				t.Cleanup(cancel)
			}
			req := newRequest(t, ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
			if tc.callers != "" {
				req.Header.Set(transport.TimeoutHeader, tc.callers)
			}
			done := goRoundTrip(tr, req)
			sleep := 1 // the backoff's timer is the first armed, or the second after attempt 1's timeout
			if tc.perAttempt > 0 {
				sleep = 2
			}
			waitArmed(t, fc, sleep)
			fc.Advance(100 * time.Millisecond)
			r := recv(t, done, "RoundTrip")
			closeResp(r)
			if g := got.get(); !slices.Equal(g, tc.want) {
				t.Errorf("%s %q, want %q", transport.TimeoutHeader, g, tc.want)
			}
		})
	}
}

// TestTransportSendsNothingWithNoTimeLeft: with less than MinHopTimeout
// left of its deadline, a Transport does not send the attempt to a peer:
// the request fails at once with an error matching
// context.DeadlineExceeded, the breaker (threshold 1) does not count it,
// and the request's body is closed all the same. A host that is no peer
// is sent the attempt (it has no protocol to be told by).
func TestTransportSendsNothingWithNoTimeLeft(t *testing.T) {
	for _, tc := range []struct {
		name string
		peer bool
		want int32
	}{
		{"a peer", true, 0},
		{"no peer", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			var calls events[string]
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				calls.add(r.URL.Host)
				return fakeResponse(r, 200, "ok"), nil
			})
			peers := transport.WithHopPeers(func(string) bool { return tc.peer })
			tr := transport.New(base, peers, transport.WithClock(fc), transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 1}))
			ctx, cancel := context.WithDeadline(testCtx(t), fc.Now().Add(900*time.Microsecond))
			t.Cleanup(cancel)
			body := newCallerBody(strings.NewReader("x"))
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "http://127.0.0.1:1/", body)) // sent once, its body unread
			if err == nil {
				readBody(t, resp)
			}
			if n := int32(len(calls.get())); n != tc.want {
				t.Fatalf("the base saw %d attempts, want %d", n, tc.want)
			}
			if tc.peer && body.closes.Load() != 1 {
				t.Errorf("the request body was closed %d times, want once", body.closes.Load())
			}
			if tc.peer && (!errors.Is(err, context.DeadlineExceeded) || breakerState(tr, "127.0.0.1:1") != resilience.BreakerClosed) {
				t.Errorf("error %v, breaker %v; want one matching context.DeadlineExceeded, and closed", err, breakerState(tr, "127.0.0.1:1"))
			}
		})
	}
}

// TestMiddlewareSendsTheCallersTimeLeftDown: under Middleware, a Transport
// called with the request's context sends a peer what is left of the time
// its trusted caller gave, on the fake clock: all of it on the first
// attempt, less the backoff on the retry; and it starts no retry whose
// backoff would end at or after that deadline (the call ends with the
// answer it has, past_deadline).
func TestMiddlewareSendsTheCallersTimeLeftDown(t *testing.T) {
	tests := []struct {
		name       string
		callers    string // the trusted caller's TimeoutHeader
		sleeps     bool   // a backoff sleep starts
		want       []string
		wantReason resilience.EndReason
	}{
		{"time for a retry", "250", true, []string{"250", "150"}, resilience.ReasonAttemptsExhausted},
		{"no time for a retry", "80", false, []string{"80"}, resilience.ReasonPastDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := newClock()
			var sent events[string]
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				sent.add(strings.Join(r.Header[transport.TimeoutHeader], ","))
				return fakeResponse(r, 503, "down"), nil
			})
			var reason resilience.EndReason
			hooks := transport.Hooks{OnCallEnd: func(e resilience.CallEndEvent) { reason = e.Reason }}
			tr := transport.New(base, loopbackPeers, transport.WithClock(fc), transport.WithMaxAttempts(2),
				transport.WithBackoff(resilience.Constant(100*time.Millisecond)), transport.WithRetryBudget(0, 0),
				transport.WithHooks(hooks))
			h := transport.Middleware(relay(t, tr, "http://127.0.0.1:1/", nil), trustLoopback, transport.WithClock(fc))
			req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(testCtx(t))
			req.RemoteAddr = "127.0.0.1:4321"
			req.Header.Set(transport.TimeoutHeader, tc.callers)
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(rec, req)
			}()
			if tc.sleeps {
				waitArmed(t, fc, 1)
				fc.Advance(100 * time.Millisecond)
			}
			recv(t, done, "the handler")
			if got := sent.get(); !slices.Equal(got, tc.want) || reason != tc.wantReason || rec.Code != 503 {
				t.Errorf("the peer was sent %s %q, the call ended %v, answered %d; want %q, %v, 503", transport.TimeoutHeader, got, reason, rec.Code, tc.want, tc.wantReason)
			}
		})
	}
}
