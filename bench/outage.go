package bench

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// outageRetry is the outage configuration every candidate gets.
var outageRetry = retryConfig{attempts: 4, backoff: time.Millisecond}

// OutageRow is one candidate's amplification while every answer is 503.
type OutageRow struct {
	Name           string
	Client, Server int64
	PerRequest     float64 // server requests ÷ client requests
}

// BreakerOpening is how fast gotry's breaker stops the traffic.
type BreakerOpening struct {
	Opened                     bool
	After                      time.Duration // from the first request to the first refusal
	ClientBefore, ServerBefore int64         // requests sent / received before the first refusal
	Client, Server             int64         // over the whole run
	PerRequest                 float64
}

// OutageResult is the amplification table.
type OutageResult struct {
	Rate     float64
	Duration time.Duration
	Rows     []OutageRow
	Breaker  BreakerOpening
}

// runOutage offers cfg.outageRate requests per second for cfg.outageTime to
// a server that answers 503 to everything, with 4 attempts and a 1ms
// constant backoff for every candidate, and counts what reaches the server.
func runOutage(cfg *Config) (*OutageResult, error) {
	be := newBackend()
	defer be.Close()
	url := be.URL() + "/item"
	res := &OutageResult{Rate: cfg.outageRate, Duration: cfg.outageTime}
	cands := []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{
		{"gotry defaults (budget 25% + reserve 2)", func(b http.RoundTripper) http.RoundTripper { return gotryRetry(b, outageRetry) }},
		{"gotry, budget off", func(b http.RoundTripper) http.RoundTripper {
			return gotryRetry(b, outageRetry, transport.WithRetryBudget(0, 0))
		}},
		{"go-retryablehttp", func(b http.RoundTripper) http.RoundTripper { return retryableHTTP(b, outageRetry) }},
		{"failsafe-go retry", func(b http.RoundTripper) http.RoundTripper { return failsafeRetry(b, outageRetry, 0) }},
		{"heimdall retries", func(b http.RoundTripper) http.RoundTripper { return heimdallRetry(b, outageRetry) }},
	}
	for _, c := range cands {
		cfg.progress("outage: %s", c.name)
		base := newLoopbackBase()
		client := &http.Client{Transport: c.wrap(base)}
		be.reset()
		be.downUntil.Store(time.Now().Add(time.Hour).UnixNano())
		recs := openLoop(client, url, cfg.outageRate, cfg.outageTime, time.Now(), nil)
		time.Sleep(20 * time.Millisecond)
		base.CloseIdleConnections()
		srv := be.requests.Load()
		res.Rows = append(res.Rows, OutageRow{Name: c.name, Client: int64(len(recs)), Server: srv,
			PerRequest: float64(srv) / float64(len(recs))})
	}

	// gotry with its breaker on (default config): when does it stop sending?
	cfg.progress("outage: gotry breaker")
	base := newLoopbackBase()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: gotryRetry(base, outageRetry, transport.WithBreaker(resilience.BreakerConfig{}))}
	be.reset()
	be.downUntil.Store(time.Now().Add(time.Hour).UnixNano())
	var (
		opened     atomic.Bool
		serverAt   atomic.Int64
		openedAtNs atomic.Int64
	)
	t0 := time.Now()
	recs := openLoop(client, url, cfg.outageRate, cfg.outageTime, t0, func(err error) {
		if isCircuitOpen(err) && opened.CompareAndSwap(false, true) {
			serverAt.Store(be.requests.Load())
			openedAtNs.Store(int64(time.Since(t0)))
		}
	})
	time.Sleep(20 * time.Millisecond)
	b := BreakerOpening{Opened: opened.Load(), Client: int64(len(recs)), Server: be.requests.Load()}
	b.PerRequest = float64(b.Server) / float64(b.Client)
	if b.Opened {
		// The first refused request by start time marks the moment.
		first := time.Duration(openedAtNs.Load())
		for _, r := range recs {
			if r.open && r.start < first {
				first = r.start
			}
		}
		b.After = first
		for _, r := range recs {
			if r.start < first {
				b.ClientBefore++
			}
		}
		b.ServerBefore = serverAt.Load()
	}
	res.Breaker = b
	return res, nil
}

func (res *OutageResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Amplification during a total outage\n\n")
	fmt.Fprintf(w, "Every answer is 503. %.0f requests/s offered (open loop) for %v; every candidate allows 4 attempts with a 1ms constant backoff.\n\n",
		res.Rate, res.Duration)
	fmt.Fprintf(w, "| candidate | client requests | server requests | attempts per request |\n|---|---:|---:|---:|\n")
	for _, r := range res.Rows {
		fmt.Fprintf(w, "| %s | %d | %d | %.3f |\n", r.Name, r.Client, r.Server, r.PerRequest)
	}
	b := res.Breaker
	fmt.Fprintf(w, "| gotry defaults + breaker (threshold 5, open 30s) | %d | %d | %.3f |\n", b.Client, b.Server, b.PerRequest)
	if b.Opened {
		fmt.Fprintf(w, "\ngotry's breaker refused its first request %s after the outage began; by then %d requests had been sent and the server had received %d attempts. For the rest of the run, %d more attempts reached the server (attempts already in flight; the breaker stays open 30s).\n",
			fmtDur(b.After), b.ClientBefore, b.ServerBefore, b.Server-b.ServerBefore)
	} else {
		fmt.Fprintf(w, "\ngotry's breaker never opened during the run.\n")
	}
}
