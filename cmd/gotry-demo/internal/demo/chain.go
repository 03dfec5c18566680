package demo

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The chain: the virtual host chainHost is not a set of dice but a service
// of its own, behind transport.Middleware, that calls chainCallee (another
// virtual host) through a gotry transport for every request it serves. The
// demo's client takes chainHost for a hop peer (transport.WithHopPeers)
// and the service trusts loopback callers (transport.WithTrustedCallers),
// so the hop protocol runs between them: the client tells the service how
// many retries it will still make and how much time it has left
// (transport.RetriesLeftHeader, transport.TimeoutHeader), the service
// retries below only on the client's last attempt and stops at the
// client's deadline, and while chainCallee is down (the default outage)
// the service's answers carry transport.PushbackHeader, which ends the
// client's retries. The client gives checkout requests chainDeadline, so
// the callee's slow answers run some of them out of time.
const (
	chainHost   = "checkout"
	chainCallee = "payments"
	// chainDeadline is what a checkout request may take, retries included:
	// a service level a shopper would notice, which the callee's slow
	// answers (300 to 600 ms, 5% of them) pass.
	chainDeadline = 250 * time.Millisecond
)

// chainService is chainHost's handler: it GETs the payment of the order
// from chainCallee through a transport of its own (the upstream's dialer,
// the demo's per-attempt timeout, a breaker that opens for 10 s) with the
// request's context, so under Middleware the client's retries and deadline
// hold below too, and answers with the callee's status, or 503 when the
// call below failed without an answer. Its breaker stays open longer than
// the client's (5 s), so the client's probes during an outage of the
// callee find it open and get pushback, as a service with gotry's default
// breaker (30 s) would answer them.
func chainService(dial func(ctx context.Context, network, addr string) (net.Conn, error)) (http.Handler, func()) {
	base := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	below := transport.New(base,
		transport.WithPerAttemptTimeout(time.Second),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 5, OpenDuration: 10 * time.Second}))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/orders/")
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+chainCallee+"/payments/"+id, nil)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, `{"error":"bad order"}`)
			return
		}
		resp, err := below.RoundTrip(req)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":"payments unreachable"}`)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			writeJSON(w, resp.StatusCode, `{"error":"payments failed"}`)
			return
		}
		writeJSON(w, http.StatusOK, `{"host":"`+chainHost+`","ok":true}`)
	})
	return transport.Middleware(h, transport.WithTrustedCallers(fromLoopback)), base.CloseIdleConnections
}

// fromLoopback reports whether r came from this machine: the demo's own
// client. Every other caller's hop headers are removed.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isHopPeer reports whether host (a request's host name, no port) speaks
// the hop protocol: chainHost, the demo's only service behind Middleware.
func isHopPeer(host string) bool { return host == chainHost }
