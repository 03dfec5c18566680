package demo

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// chainUpstream starts payments and checkout with no faults but those of
// f, payments down for the whole test when down is set, and a gotry client
// that takes checkout for a hop peer (as the demo's does) and records how
// each request ended.
func chainUpstream(t *testing.T, f Faults, down bool) (*transport.Transport, func() []resilience.EndReason) {
	t.Helper()
	cfg := UpstreamConfig{Hosts: []string{chainCallee, chainHost}, Faults: f}
	if down {
		cfg.Outage = Outage{Host: chainCallee, For: time.Hour}
	}
	u, err := StartUpstream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{DialContext: u.DialContext}
	var mu sync.Mutex
	var reasons []resilience.EndReason
	tr := transport.New(base, transport.WithHopPeers(isHopPeer),
		transport.WithBackoff(resilience.Constant(time.Millisecond)),
		transport.WithHooks(transport.Hooks{OnCallEnd: func(e resilience.CallEndEvent) {
			mu.Lock()
			reasons = append(reasons, e.Reason)
			mu.Unlock()
		}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := u.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		base.CloseIdleConnections()
	})
	return tr, func() []resilience.EndReason {
		mu.Lock()
		defer mu.Unlock()
		return append([]resilience.EndReason(nil), reasons...)
	}
}

// getOrder GETs an order from checkout through tr with ctx and returns the
// answer's status and header (0 and nil on an error).
func getOrder(ctx context.Context, tr http.RoundTripper) (int, http.Header) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+chainHost+"/orders/1", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// While payments is down, checkout's breaker below opens after five
// failed calls, and from then on its 503s carry the pushback header: the
// client makes one attempt of each such request and ends it as pushback,
// where before it retried checkout's plain 503s.
func TestCheckoutPushesBackWhilePaymentsIsDown(t *testing.T) {
	tr, reasons := chainUpstream(t, Faults{}, true)
	var pushed int
	for n := range 10 {
		code, h := getOrder(context.Background(), tr)
		if code != http.StatusServiceUnavailable {
			t.Fatalf("order %d: status %d, want 503 while payments is down", n, code)
		}
		if h.Get(transport.PushbackHeader) != "" {
			pushed++
		}
	}
	got := reasons()
	if pushed == 0 || got[len(got)-1] != resilience.ReasonPushback {
		t.Fatalf("%d answers pushed back, reasons %v: want checkout to push back once its breaker below is open", pushed, got)
	}
}

// With every payment slower than checkout's deadline, a checkout request
// ends when its deadline passes, not when payments answers, and ends out
// of time: the requests the dashboards' "Requests out of time" panel
// counts. (That the deadline also flows down to checkout's own call is the
// transport's tests'.)
func TestCheckoutStopsAtTheCallersDeadline(t *testing.T) {
	tr, reasons := chainUpstream(t, Faults{Slow: 1, SlowMin: 2 * time.Second}, false)
	ctx, cancel := context.WithTimeout(context.Background(), chainDeadline)
	defer cancel()
	start := time.Now()
	code, _ := getOrder(ctx, tr)
	if took := time.Since(start); code == http.StatusOK || took > time.Second {
		t.Fatalf("status %d after %v, want the request cut off near its %v deadline", code, took, chainDeadline)
	}
	if got := reasons(); len(got) != 1 || (got[0] != resilience.ReasonPastDeadline && got[0] != resilience.ReasonCanceled) {
		t.Fatalf("reasons %v, want the request out of time", got)
	}
}
