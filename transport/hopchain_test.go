package transport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// chainMargin is how late after the top caller's deadline an attempt
// start (or a leaf arrival) may be stamped and still count as on time: a
// hop's deadline is its arrival plus the time its caller had left, so it
// falls after the top's by the request's transit through the hops above
// it (less up to a millisecond a hop, the header's rounding), and a
// goroutine's stamp may be late by the scheduler's delay on a loaded
// machine. It is also how long before the deadline the latest attempt
// start may fall (see the end of testChainDeadline). Measured on
// loopback, connections open, under -race on two cores: at a load average
// of 7 (120 runs of the test's 8 cases) the latest start was 3.5 ms after
// the deadline, the latest answer 6 ms; at loads of 3 and 10 (136 runs)
// the latest start was 10 ms after it, the latest leaf arrival 28 ms, the
// latest answer 32 ms. The margin is several times that, for a GC pause
// or a busier CI machine, and still far below what the test tells apart:
// without propagation, hops worked 1.3 s past the deadline.
const chainMargin = 150 * time.Millisecond

// stamps records when things happened, by whom.
type stamps struct {
	mu  sync.Mutex
	at  []time.Time
	who []string
}

func (s *stamps) add(who string) {
	now := time.Now()
	s.mu.Lock()
	s.at = append(s.at, now)
	s.who = append(s.who, who)
	s.mu.Unlock()
}

func (s *stamps) reset() {
	s.mu.Lock()
	s.at, s.who = nil, nil
	s.mu.Unlock()
}

// after returns the stamps later than t, and the latest stamp's distance
// from t (negative when all are before it).
func (s *stamps) after(t time.Time) (late []string, latest time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	latest = -time.Hour
	for i, at := range s.at {
		if d := at.Sub(t); d > latest {
			latest = d
		}
		if at.After(t) {
			late = append(late, s.who[i]+" +"+at.Sub(t).String())
		}
	}
	return late, latest, len(s.at)
}

// TestChainDeadlineFlowsDown: client → A → B → C → leaf, every service
// behind Middleware trusting loopback callers, every Transport taking
// loopback hosts for peers, with up to 50 attempts, a 10ms backoff, no
// budget, hedging after 25ms and a 60ms per-attempt timeout, so a hop
// retries and hedges until its time is up; the client makes one attempt,
// with a 300ms deadline, so A retries through the window (and the hops
// below make one attempt for each of A's, A having promised more).
// Whether the leaf stalls until its caller gives up or fails after 40ms,
// over HTTP/1.1 and HTTP/2, and whether the client reaches A directly or
// through a proxy that keeps the request running after the client left
// (so that A learns of the client's end only from the deadline it was
// told), no attempt starts anywhere, and nothing arrives at the leaf,
// after the client's deadline (within chainMargin), the client has its
// answer by then, and every hop is done soon after.
func TestChainDeadlineFlowsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers and a 300ms deadline")
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		for _, leafMode := range []string{"stalls", "fails after 40ms"} {
			for _, front := range []string{"direct", "through a proxy that ignores aborts"} {
				t.Run(proto+"/leaf "+leafMode+"/"+front, func(t *testing.T) {
					testChainDeadline(t, proto == "HTTP/2", leafMode == "stalls", front != "direct")
				})
			}
		}
	}
}

func testChainDeadline(t *testing.T, h2, stall, proxy bool) {
	var starts, arrivals stamps
	newServer := func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		if h2 {
			s.EnableHTTP2 = true
			s.StartTLS()
		} else {
			s.Start()
		}
		return s
	}
	var tlsBase *http.Transport // trusts httptest's certificate, which every TLS test server shares
	newBaseFor := func(s *httptest.Server) http.RoundTripper {
		var b *http.Transport
		switch {
		case !h2:
			b = &http.Transport{}
		case tlsBase == nil:
			tlsBase = s.Client().Transport.(*http.Transport)
			b = tlsBase.Clone()
		default:
			b = tlsBase.Clone()
		}
		t.Cleanup(b.CloseIdleConnections)
		return b
	}
	hopTransport := func(name string, s *httptest.Server, opts ...transport.Option) *transport.Transport {
		hooks := transport.Hooks{OnAttemptStart: func(ctx context.Context, _ resilience.AttemptStartEvent) context.Context {
			starts.add(name)
			return ctx
		}}
		opts = append([]transport.Option{loopbackPeers, transport.WithHooks(hooks), transport.WithMaxAttempts(50),
			transport.WithBackoff(resilience.Constant(10 * time.Millisecond)), transport.WithRetryBudget(0, 0),
			transport.WithHedging(25*time.Millisecond, 1), transport.WithPerAttemptTimeout(60 * time.Millisecond)}, opts...)
		return transport.New(newBaseFor(s), opts...)
	}

	var warm atomic.Bool // the leaf answers at once while the connections are opened
	leaf := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if warm.Load() {
			return
		}
		arrivals.add("leaf")
		if stall {
			<-r.Context().Done()
			return
		}
		select {
		case <-time.After(40 * time.Millisecond):
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	}))
	servers := []*httptest.Server{leaf}
	next := leaf
	for _, name := range []string{"C", "B", "A"} {
		tr := hopTransport(name, next)
		url := next.URL
		s := newServer(transport.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, url, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
		}), trustLoopback))
		servers = append(servers, s)
		next = s
	}
	if proxy {
		// It passes the request on, headers and all, with a context the
		// client's going does not end: A hears of the client's end only
		// from the deadline.
		base, url := newBaseFor(next), next.URL
		p := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodGet, url, nil)
			req.Header = r.Header.Clone()
			resp, err := base.RoundTrip(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
		}))
		servers = append(servers, p)
		next = p
	}
	client := hopTransport("client", next, transport.WithMaxAttempts(1), transport.WithHedging(0, 0), transport.WithPerAttemptTimeout(0))

	// Open every hop's connection first, as a running service has them: a
	// relative deadline does not count the time the request takes to
	// arrive, a new connection's set-up included (over TLS under -race,
	// tens of milliseconds), by which each hop's deadline would fall later
	// than its caller's.
	warm.Store(true)
	resp, err := client.RoundTrip(newRequest(t, testCtx(t), http.MethodGet, next.URL, nil))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("warming the chain up: %v, %v", resp, err)
	}
	resp.Body.Close()
	starts.reset() // (a hedge of the warm-up's may start late: it is stamped before the deadline)
	warm.Store(false)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	resp, err = client.RoundTrip(newRequest(t, ctx, http.MethodGet, next.URL, nil))
	returned := time.Now()
	if err == nil {
		resp.Body.Close()
	}
	// Close from the top down: each Close waits for its server's handlers,
	// so when the leaf's returns, nothing of the request runs anywhere. A
	// hop that never heard of the deadline would keep its handler, and the
	// stalled leaf's, running for ever.
	closed := make(chan struct{})
	go func() {
		for i := len(servers) - 1; i >= 0; i-- {
			servers[i].Close()
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("the hops were still working 5s after the client's deadline")
	}

	late, latest, n := starts.after(deadline.Add(chainMargin))
	_, latestStart, _ := starts.after(deadline)
	lateLeaf, latestLeaf, leafN := arrivals.after(deadline.Add(chainMargin))
	t.Logf("%d attempt starts, %d leaf arrivals; latest start %v, latest arrival %v, answer %v after the deadline (margin %v)",
		n, leafN, latestStart, latestLeaf+chainMargin, returned.Sub(deadline), chainMargin)
	if len(late) > 0 || len(lateLeaf) > 0 {
		t.Errorf("after the deadline + %v: attempt starts %q, leaf arrivals %q (latest %v)", chainMargin, late, lateLeaf, latest)
	}
	if d := returned.Sub(deadline); d > chainMargin {
		t.Errorf("the client's answer came %v after its deadline", d)
	}
	// The chain must have been working near the end of the window, or the
	// checks above prove nothing: an attempt must have started within
	// chainMargin before the deadline, as none may start later than
	// chainMargin after it. Attempts start up to about 70 ms apart a hop, a
	// scheduler's delay on a loaded machine adds to that gap, and a start
	// that would fall after the deadline is not made, so the latest start
	// falls further before the deadline than the latest answer after it.
	// (Bounds of 50 and then 100 ms were too tight: at loads of 3 and 10 on
	// two cores under -race, 136 runs put the latest start 1 to 70 ms before
	// the deadline, and a loaded CI machine had failed 50 at 50.7 ms.) How
	// much time each hop is told is exact on the fake clock
	// (TestMiddlewareTimeoutFromATrustedCaller, TestTransportSendsItsTimeLeft,
	// TestMiddlewareSendsTheCallersTimeLeftDown); this test shows that it
	// reaches every hop, over the wire.
	if latestStart < -chainMargin || leafN < 4 {
		t.Errorf("the latest attempt started %v after the deadline, %d leaf arrivals: the chain did not retry or hedge through the window", latestStart, leafN)
	}
}
