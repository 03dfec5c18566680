package bench

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// HedgeRow is one candidate's latency against a server that stalls a fixed
// share of requests, pooled over the rounds.
type HedgeRow struct {
	Name               string
	P50, P99, P999     time.Duration
	Max                time.Duration
	P99Lo, P99Hi       time.Duration // p99's range over the rounds
	Client, Server     int64
	ExtraLoad          float64 // server requests ÷ client requests − 1
	Errors             int64
	Stalled            int // requests that took the whole stall or longer
	P99VsUnhedgedRatio float64
}

// HedgeResult is the tail-latency table.
type HedgeResult struct {
	Delay                                 time.Duration
	StallEvery                            int
	StallFor                              time.Duration
	Requests, Workers                     int
	Unstalled50, Unstalled95, Unstalled99 time.Duration // bare, no stalls
	Rows                                  []HedgeRow
}

// runHedging sends cfg.hedgeRequests requests from cfg.hedgeWorkers
// goroutines to a server where every 20th request (by the server's counter,
// reset per candidate) stalls 200ms, and compares no hedging, gotry's
// hedging and failsafe-go's at the same delay.
func runHedging(cfg *Config) (*HedgeResult, error) {
	be := newBackend()
	defer be.Close()
	const every, stall = 20, 200 * time.Millisecond
	res := &HedgeResult{Delay: cfg.HedgeDelay, StallEvery: every, StallFor: stall,
		Requests: cfg.hedgeRequests, Workers: cfg.hedgeWorkers}
	type cand struct {
		name string
		base *http.Transport
		c    *http.Client
	}
	mk := func(name string, wrap func(http.RoundTripper) http.RoundTripper) cand {
		b := newLoopbackBase()
		return cand{name: name, base: b, c: &http.Client{Transport: wrap(b)}}
	}
	cands := []cand{
		mk("no hedging (bare)", func(b http.RoundTripper) http.RoundTripper { return b }),
		mk(fmt.Sprintf("gotry WithHedging(%v, 1)", cfg.HedgeDelay), func(b http.RoundTripper) http.RoundTripper {
			return transport.New(b, transport.WithHedging(cfg.HedgeDelay, 1))
		}),
		mk(fmt.Sprintf("failsafe-go retry+hedge(%v)", cfg.HedgeDelay), func(b http.RoundTripper) http.RoundTripper {
			return failsafeRetry(b, successRetry, cfg.HedgeDelay)
		}),
		mk("gotry WithAdaptiveHedging(5%, 1), no delay given", func(b http.RoundTripper) http.RoundTripper {
			return transport.New(b, transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 1))
		}),
	}
	defer func() {
		for _, c := range cands {
			c.base.CloseIdleConnections()
		}
	}()
	url := be.URL() + "/item"

	// The healthy latency, to show where the hedge delay sits.
	be.reset()
	healthy, _, _ := drive(cands[0].c, url, max(cfg.hedgeRequests/4, 50), cfg.hedgeWorkers)
	res.Unstalled50, res.Unstalled95, res.Unstalled99 = percentile(healthy, .5), percentile(healthy, .95), percentile(healthy, .99)
	for _, c := range cands { // warm every pool
		drive(c.c, url, 2*cfg.hedgeWorkers, cfg.hedgeWorkers)
	}

	lat := make([][]time.Duration, len(cands))
	p99s := make([][]time.Duration, len(cands))
	client := make([]int64, len(cands))
	server := make([]int64, len(cands))
	errs := make([]int64, len(cands))
	for r := range cfg.hedgeRounds {
		cfg.progress("hedging: round %d/%d", r+1, cfg.hedgeRounds)
		for j := range cands {
			ci := (j + r) % len(cands)
			be.reset()
			be.stallFor.Store(int64(stall))
			be.stallEvery.Store(every)
			l, ok, bad := drive(cands[ci].c, url, cfg.hedgeRequests, cfg.hedgeWorkers)
			be.stallEvery.Store(0)
			time.Sleep(20 * time.Millisecond) // let cancelled losers reach the server's count
			lat[ci] = append(lat[ci], l...)
			p99s[ci] = append(p99s[ci], percentile(l, .99))
			client[ci] += ok + bad
			errs[ci] += bad
			server[ci] += be.requests.Load()
		}
	}
	for ci, c := range cands {
		slices.Sort(lat[ci])
		row := HedgeRow{Name: c.name, P50: percentile(lat[ci], .5), P99: percentile(lat[ci], .99),
			P999: percentile(lat[ci], .999), Max: lat[ci][len(lat[ci])-1],
			P99Lo: slices.Min(p99s[ci]), P99Hi: slices.Max(p99s[ci]),
			Client: client[ci], Server: server[ci], Errors: errs[ci],
			ExtraLoad: float64(server[ci])/float64(client[ci]) - 1}
		for _, l := range lat[ci] {
			if l >= stall {
				row.Stalled++
			}
		}
		res.Rows = append(res.Rows, row)
	}
	for i := range res.Rows {
		res.Rows[i].P99VsUnhedgedRatio = float64(res.Rows[i].P99) / float64(res.Rows[0].P99)
	}
	return res, nil
}

// drive sends n GETs to url from `workers` goroutines and returns each
// request's latency (until its body is read and closed), sorted, with the
// counts of successes and failures.
func drive(c *http.Client, url string, n, workers int) (lat []time.Duration, ok, bad int64) {
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	lat = make([]time.Duration, 0, n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, n/workers+1)
			var o, b int64
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				resp, err := c.Get(url)
				finish(resp)
				local = append(local, time.Since(t0))
				if err != nil || resp.StatusCode != http.StatusOK {
					b++
				} else {
					o++
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			ok += o
			bad += b
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, ok, bad
}

func (res *HedgeResult) write(w io.Writer, rounds int) {
	fmt.Fprintf(w, "\n### Tail latency under hedging\n\n")
	fmt.Fprintf(w, "Every %dth request the server receives stalls %v (counter reset per candidate and round). "+
		"%d requests per round from %d goroutines, %d round(s), latencies pooled. "+
		"Healthy latency (bare, no stalls): p50 %s, p95 %s, p99 %s; hedge delay %v for both hedgers.\n\n",
		res.StallEvery, res.StallFor, res.Requests, res.Workers, rounds,
		fmtDur(res.Unstalled50), fmtDur(res.Unstalled95), fmtDur(res.Unstalled99), res.Delay)
	fmt.Fprintf(w, "| candidate | p50 | p99 (round range) | p99.9 | max | p99 ÷ unhedged | requests ≥ %v | client reqs | server reqs | extra load | errors |\n", res.StallFor)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Rows {
		fmt.Fprintf(w, "| %s | %s | %s (%s–%s) | %s | %s | %.3f | %d | %d | %d | %+.1f%% | %d |\n", r.Name,
			fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P99Lo), fmtDur(r.P99Hi), fmtDur(r.P999), fmtDur(r.Max),
			r.P99VsUnhedgedRatio, r.Stalled, r.Client, r.Server, 100*r.ExtraLoad, r.Errors)
	}
}
