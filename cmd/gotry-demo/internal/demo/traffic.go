package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/transport"
)

// target is one kind of request the load sends.
type target struct {
	host   string // breaker key and view name
	method string
	url    func(n int) string
	body   func(n int) []byte // nil: no body
	// hedgeDelay, when set, is the request's fixed hedge delay (a Policy)
	// on a transport that hedges other hosts adaptively.
	hedgeDelay time.Duration
	// noLimit exempts the request from the concurrency limit (a Policy).
	noLimit bool
	// timeout, when set, bounds the request (retries included) instead of
	// the load's timeout.
	timeout time.Duration
}

// demoTargets are the requests to the virtual hosts: inventory and search are
// GETs, payments a PUT with a JSON body (idempotent by method, and one that
// net/http will not resend on its own, so connection resets reach gotry),
// checkout a GET of an order within chainDeadline (see chainService).
func demoTargets(hosts []string) []target {
	var ts []target
	for _, h := range hosts {
		t := target{host: h, method: http.MethodGet, url: func(n int) string { return fmt.Sprintf("http://%s/items/%d", h, n%500) }}
		switch h {
		case "search":
			t.url = func(n int) string { return fmt.Sprintf("http://%s/search?q=term-%d", h, n%50) }
		case "payments":
			t.method = http.MethodPut
			t.url = func(n int) string { return fmt.Sprintf("http://%s/payments/%d", h, n) }
			t.body = func(n int) []byte { return fmt.Appendf(nil, `{"id":%d,"amount_cents":%d}`, n, 100+n%9000) }
		case chainHost:
			t.url = func(n int) string { return fmt.Sprintf("http://%s/orders/%d", h, n) }
			t.timeout = chainDeadline
		}
		ts = append(ts, t)
	}
	return ts
}

// urlTargets are GETs of the given URLs (the -target mode).
func urlTargets(urls []string) ([]target, error) {
	var ts []target
	for _, raw := range urls {
		req, err := http.NewRequest(http.MethodGet, raw, nil)
		if err != nil {
			return nil, fmt.Errorf("demo: target %q: %w", raw, err)
		}
		if req.URL.Host == "" {
			return nil, fmt.Errorf("demo: target %q has no host", raw)
		}
		ts = append(ts, target{host: req.URL.Host, method: http.MethodGet, url: func(int) string { return raw }})
	}
	return ts, nil
}

// load sends requests at a fixed rate from a fixed pool of workers: an open
// loop, so a slow upstream does not slow the offered load down; a request
// due while every worker is busy is skipped and counted.
type load struct {
	client      *http.Client
	targets     []target
	rate        float64
	concurrency int
	timeout     time.Duration // per request, including retries
	stats       *stats
	seed        uint64
}

// run sends until ctx ends, then waits for the requests in flight, which
// run under their own timeout rather than ctx so that they finish.
func (l *load) run(ctx context.Context) {
	jobs := make(chan int) // request numbers; unbuffered: a send means a free worker
	var wg sync.WaitGroup
	for range l.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				l.do(n)
			}
		}()
	}
	l.pace(ctx, jobs)
	close(jobs)
	wg.Wait()
}

// pace hands out request numbers at l.rate until ctx ends.
func (l *load) pace(ctx context.Context, jobs chan<- int) {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int(now.Sub(start).Seconds() * l.rate)
			for ; sent < due; sent++ {
				select {
				case jobs <- sent:
				default:
					l.stats.skipped.Add(1)
				}
			}
		}
	}
}

// do sends request n and reads and closes its body.
func (l *load) do(n int) {
	// Spread requests over targets with a seeded shuffle: deterministic for a
	// seed, not a fixed rotation.
	r := rand.New(rand.NewPCG(l.seed, uint64(n)))
	t := l.targets[r.IntN(len(l.targets))]
	timeout := l.timeout
	if t.timeout > 0 {
		timeout = t.timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if t.hedgeDelay > 0 || t.noLimit {
		ctx = transport.WithPolicy(ctx, transport.Policy{HedgeDelay: t.hedgeDelay, NoLimit: t.noLimit})
	}
	var body io.Reader
	if t.body != nil {
		body = bytes.NewReader(t.body(n))
	}
	req, err := http.NewRequestWithContext(ctx, t.method, t.url(n), body)
	if err != nil {
		return // targets are validated; nothing to count
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "gotry-demo")
	resp, err := l.client.Do(req)
	if err != nil {
		return // counted by the hooks
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
