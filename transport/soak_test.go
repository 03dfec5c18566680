package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// soakDuration is how long TestSoak runs: GOTRY_SOAK (a Go duration), 10s by
// default.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("GOTRY_SOAK")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("GOTRY_SOAK=%q: want a positive Go duration such as 60s", v)
	}
	return d
}

// soakHandler answers with a random fault: mostly successes, then 503s,
// 429s, resets, truncated bodies, slow headers, slow bodies and 500s. The
// first few hosts are sick (mostly 503s), so their breakers trip. It counts
// the arrivals of every POST.
func soakHandler(posts *seCounts) http.HandlerFunc {
	var gone atomic.Int32
	faults := []struct {
		weight int
		h      http.HandlerFunc
	}{
		{55, answerOK},
		{5, func(w http.ResponseWriter, r *http.Request) { // a large body, often abandoned by the caller
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, strings.Repeat("y", 256<<10))
		}},
		{10, answerStatus(503)},
		{5, answerStatus(429, "Retry-After", "0")},
		{5, resetBeforeHeaders},
		{4, partialResponse(nil)},
		{4, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case <-time.After(time.Duration(rand.IntN(400)) * time.Millisecond):
				answerOK(w, r)
			case <-r.Context().Done():
				gone.Add(1)
			}
		}},
		{4, slowBody(time.Duration(rand.IntN(100)) * time.Millisecond)},
		{4, answerStatus(500)},
		{4, answerStatus(404)},
	}
	total := 0
	for _, f := range faults {
		total += f.weight
	}
	return posts.wrap(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "h1.") || strings.HasPrefix(r.Host, "h2.") || strings.HasPrefix(r.Host, "h3.") {
			if rand.IntN(10) < 8 {
				answerStatus(503)(w, r)
				return
			}
		}
		n := rand.IntN(total)
		for _, f := range faults {
			if n < f.weight {
				f.h(w, r)
				return
			}
			n -= f.weight
		}
	})
}

// TestSoak runs many goroutines against many hosts (three loopback servers
// behind forty host names) with random faults, with the breaker, the budget,
// hedging and per-attempt timeouts on, for GOTRY_SOAK (default 10s). After
// it: every response body the base handed out was closed, no POST without an
// idempotency key arrived twice, the RoundTripper contract held on every
// call, no goroutine is left and the heap is back near where it started.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: skipped with -short")
	}
	noLeaksAfter(t)
	dur := soakDuration(t)
	heapBefore := settledHeap()

	posts := &seCounts{}
	const servers, hosts, workers = 3, 40, 16
	var addrs []string
	var srvs []*httptest.Server
	for range servers {
		s := httptest.NewServer(soakHandler(posts))
		srvs = append(srvs, s)
		addrs = append(addrs, s.Listener.Addr().String())
	}
	// Host hN.soak.test reaches server N mod 3: distinct hosts, hence
	// distinct breakers and connection pools, with no DNS.
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	base := &http.Transport{
		MaxIdleConnsPerHost: 4,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(host, "h"), ".soak.test"))
			if err != nil {
				return nil, fmt.Errorf("soak: unexpected host %q", host)
			}
			return dialer.DialContext(ctx, network, addrs[n%servers])
		},
	}
	l := newLedger(base)
	var stateChanges, budgetRefusals atomic.Int64
	tr := transport.New(l,
		transport.WithMaxAttempts(3),
		transport.WithBackoff(resilience.ExponentialJitter(time.Millisecond, 20*time.Millisecond)),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 4, OpenDuration: 200 * time.Millisecond, HalfOpenProbes: 2}),
		transport.WithHedging(100*time.Millisecond, 1),
		transport.WithPerAttemptTimeout(300*time.Millisecond),
		transport.WithHooks(transport.Hooks{
			OnBreakerStateChange: func(resilience.BreakerStateEvent) { stateChanges.Add(1) },
			OnBudgetExhausted:    func(resilience.BudgetEvent) { budgetRefusals.Add(1) },
		}))

	var (
		requests, ok, failed, contract, postIDs atomic.Int64
		mu                                      sync.Mutex
		kinds                                   = map[string]int{}
	)
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				requests.Add(1)
				host := "h" + strconv.Itoa(rand.IntN(hosts)) + ".soak.test"
				method, id := http.MethodGet, ""
				if rand.IntN(100) < 15 {
					method, id = http.MethodPost, fmt.Sprintf("w%d-%d", w, i)
					postIDs.Add(1)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				req, _ := http.NewRequestWithContext(ctx, method, "http://"+host+"/soak", strings.NewReader("soak payload"))
				req.Header.Set("X-Request-ID", id)
				resp, err := tr.RoundTrip(req)
				if (resp == nil) == (err == nil) {
					contract.Add(1)
				}
				if err != nil {
					failed.Add(1)
					k := soakKind(err)
					mu.Lock()
					kinds[k]++
					mu.Unlock()
				}
				if resp != nil {
					ok.Add(1)
					if rand.IntN(4) == 0 {
						_, _ = io.CopyN(io.Discard, resp.Body, 1024) // abandon the rest
					} else {
						io.Copy(io.Discard, resp.Body)
					}
					resp.Body.Close()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	l.waitBalanced(t)

	base.CloseIdleConnections()
	for _, s := range srvs {
		s.CloseClientConnections()
		s.Close()
	}
	breakers := len(tr.Stats().Hosts)
	heapAfter := settledHeap()
	runtime.KeepAlive(tr)

	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(ks)
	t.Logf("soak %v: %d requests (%d responses, %d errors: %s), %d attempts, %d POSTs, %d breaker transitions, %d budget refusals, %d breakers tracked",
		dur, requests.Load(), ok.Load(), failed.Load(), strings.Join(ks, " "), l.calls.Load(), postIDs.Load(),
		stateChanges.Load(), budgetRefusals.Load(), breakers)
	t.Logf("heap: %.1f MiB before, %.1f MiB after", mib(heapBefore), mib(heapAfter))

	if n := contract.Load(); n > 0 {
		t.Errorf("%d calls returned both or neither of response and error", n)
	}
	if requests.Load() < workers*10 || ok.Load() == 0 {
		t.Errorf("only %d requests (%d responses) in %v: the soak did not soak", requests.Load(), ok.Load(), dur)
	}
	posts.mu.Lock()
	for id, n := range posts.m {
		if id != "" && n > 1 {
			t.Errorf("POST %s without an idempotency key reached a server %d times", id, n)
		}
	}
	posts.mu.Unlock()
	if stateChanges.Load() == 0 {
		t.Errorf("no breaker ever changed state: the soak did not exercise it")
	}
	if breakers > hosts {
		t.Errorf("%d breakers tracked for %d hosts", breakers, hosts)
	}
	const slack = 16 << 20
	if heapAfter > heapBefore+slack {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB over the soak (allowed: %.0f MiB)", mib(heapBefore), mib(heapAfter), mib(slack))
	}
}

// soakKind names the kind of a RoundTrip error for the soak's summary.
func soakKind(err error) string {
	var ge *transport.Error
	switch {
	case errors.Is(err, transport.ErrCircuitOpen):
		return "circuit-open"
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, transport.ErrAttemptTimeout):
		return "caller-deadline"
	case errors.As(err, &ge):
		return "gave-up"
	case errors.Is(err, transport.ErrAttemptTimeout):
		return "attempt-timeout"
	case connBroken(err):
		return "conn-broken"
	}
	return "other"
}

// settledHeap returns the live heap after garbage collection has settled.
func settledHeap() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
