package transport_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// freezeProxy is a loopback TCP proxy whose connections can be frozen: a
// frozen connection stays open and its bytes are read and dropped, both
// ways, as on a path that went dead without a reset (a blackhole).
type freezeProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []*frozenPair
}

type frozenPair struct {
	frozen         atomic.Bool
	client, server net.Conn
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) addr() string { return p.ln.Addr().String() }

func (p *freezeProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pair := &frozenPair{client: c, server: s}
		p.mu.Lock()
		p.conns = append(p.conns, pair)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(pair, s, c)
		go p.pump(pair, c, s)
	}
}

// pump copies src to dst until either ends, dropping what it reads while
// the pair is frozen; then it closes both.
func (p *freezeProxy) pump(pair *frozenPair, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pair.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	pair.client.Close()
	pair.server.Close()
}

// freeze freezes every connection made so far and reports how many.
func (p *freezeProxy) freeze() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.frozen.Store(true)
	}
	return len(p.conns)
}

// count reports how many connections the proxy made.
func (p *freezeProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *freezeProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestHTTP2ConnectionLossIsRetriedOnAFreshConnection: Go's HTTP/2 client,
// with its health check on (http.HTTP2Config's SendPingTimeout and
// PingTimeout), closes a connection that stopped answering and fails the
// request on it with its untyped "http2: client connection lost". gotry
// classifies that as a closed connection, like an EOF over HTTP/1.1, so an
// idempotent GET is retried, on a new connection, and succeeds. The health
// check also takes a connection that per-attempt timeouts keep cutting
// attempts off on out of the pool: the retry after it is on a fresh one.
func TestHTTP2ConnectionLossIsRetriedOnAFreshConnection(t *testing.T) {
	tests := []struct {
		name              string
		perAttemptTimeout time.Duration
	}{
		{"no per-attempt timeout", 0},
		// Shorter than the health check takes to declare the connection
		// lost: retries first go back onto the frozen connection.
		{"per-attempt timeout", 100 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				io.WriteString(w, "ok")
			}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			t.Cleanup(srv.Close)
			proxy := newFreezeProxy(t, srv.Listener.Addr().String())
			base := &http.Transport{
				TLSClientConfig:   srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone(),
				ForceAttemptHTTP2: true,
				// The health check: ping a connection that read nothing
				// for 100ms; close it when the ping is not answered in
				// another 100ms.
				HTTP2: &http.HTTP2Config{SendPingTimeout: 100 * time.Millisecond, PingTimeout: 100 * time.Millisecond},
			}
			t.Cleanup(base.CloseIdleConnections)
			url := "https://" + proxy.addr() + "/"

			warm, err := base.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, warm)
			if warm.ProtoMajor != 2 {
				t.Fatalf("protocol %s, want HTTP/2", warm.Proto)
			}
			if n := proxy.freeze(); n != 1 {
				t.Fatalf("%d connections to freeze, want 1", n)
			}

			var ends events[resilience.AttemptEndEvent]
			tr := transport.New(base, noDelay, transport.WithMaxAttempts(10), transport.WithRetryBudget(0, 0),
				transport.WithPerAttemptTimeout(tc.perAttemptTimeout),
				transport.WithHooks(transport.Hooks{OnAttemptEnd: ends.add}))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v (attempts: %d)", err, len(ends.get()))
			}
			if b := readBody(t, resp); b != "ok" || resp.ProtoMajor != 2 {
				t.Errorf("got %q over %s, want ok over HTTP/2", b, resp.Proto)
			}
			got := ends.get()
			if len(got) < 2 {
				t.Fatalf("%d attempts, want the frozen one and a retry", len(got))
			}
			lost := 0
			for _, e := range got[:len(got)-1] {
				switch c := transport.ClassifyError(e.Err); c {
				case transport.ClassConnectionClosed:
					lost++
				case transport.ClassAttemptTimeout:
				default:
					t.Errorf("attempt %d failed with %v (class %v), want the connection lost or a per-attempt timeout", e.Attempt, e.Err, c)
				}
			}
			// With per-attempt timeouts as long as the health check, the
			// attempt the check cuts may time out first: what matters then
			// is the retry on a fresh connection (below).
			if lost == 0 && tc.perAttemptTimeout == 0 {
				t.Error("no attempt failed with the connection lost")
			}
			for _, e := range got {
				t.Logf("attempt %d: %v", e.Attempt, e.Err)
			}
			if n := proxy.count(); n != 2 {
				t.Errorf("%d connections in all, want the frozen one and one fresh", n)
			}
			if h := hits.Load(); h != 2 {
				t.Errorf("server saw %d requests, want the warm-up and the retry", h)
			}
		})
	}
}
