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

// ShiftRow is one candidate in the latency-shift scenario.
type ShiftRow struct {
	Name string
	// P99Before and P99After are the p99 of requests started before the
	// shift and of those started once the shift is Settle old.
	P99Before, P99After time.Duration
	// ExtraLoad is server requests ÷ client requests − 1 per second of
	// the run; MaxExtraLoad its largest value.
	ExtraLoad    []float64
	MaxExtraLoad float64
	// Delays is the hedge delay gotry's adaptive hedging used for the host,
	// sampled every 100ms (adaptive candidate only); Converged is how long
	// after the shift it first came within 25% of its final value and
	// stayed there.
	Delays    []time.Duration
	Converged time.Duration
	Errors    int64
}

// ShiftResult is the latency-shift table.
type ShiftResult struct {
	Before, After  time.Duration // base latency before and after the shift
	ShiftAt, Total time.Duration
	Settle         time.Duration
	Workers        int
	Capacity       int // requests the server serves at once
	Rows           []ShiftRow
}

// runShift sends requests from a fixed number of workers to a server whose
// every answer takes Before, then, ShiftAt into the run, After, and compares
// gotry's adaptive hedging (cap 5%) with fixed delays tuned for the old
// latency (gotry's and failsafe-go's).
func runShift(cfg *Config) (*ShiftResult, error) {
	res := &ShiftResult{Before: time.Millisecond, After: 20 * time.Millisecond,
		ShiftAt: cfg.shiftAt, Total: cfg.shiftTotal, Settle: time.Second, Workers: 16, Capacity: 24}
	if cfg.Quick {
		res.Settle = 200 * time.Millisecond
	}
	fixed := 2 * res.Before // a delay tuned for the old latency: its p95 and a margin
	type cand struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}
	adaptive := func(b http.RoundTripper) http.RoundTripper {
		return transport.New(b, transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: 0.05}, 1))
	}
	cands := []cand{
		{name: "gotry WithAdaptiveHedging(5%, 1)", wrap: adaptive},
		{name: fmt.Sprintf("gotry WithHedging(%v, 1)", fixed), wrap: func(b http.RoundTripper) http.RoundTripper {
			return transport.New(b, transport.WithHedging(fixed, 1))
		}},
		{name: fmt.Sprintf("failsafe-go retry+hedge(%v)", fixed), wrap: func(b http.RoundTripper) http.RoundTripper {
			return failsafeRetry(b, successRetry, fixed)
		}},
	}
	for i, c := range cands {
		cfg.progress("shift: %s", c.name)
		row, err := shiftOnce(res, c.wrap, i == 0)
		if err != nil {
			return nil, err
		}
		row.Name = c.name
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// shiftOnce runs the scenario for one candidate on a fresh server and base.
func shiftOnce(res *ShiftResult, wrap func(http.RoundTripper) http.RoundTripper, sampleDelay bool) (ShiftRow, error) {
	be := newBackendSlots(res.Capacity)
	defer be.Close()
	base := newLoopbackBase()
	defer base.CloseIdleConnections()
	rt := wrap(base)
	c := &http.Client{Transport: rt}
	url := be.URL() + "/item"
	be.baseDelay.Store(int64(res.Before))

	start := time.Now()
	be.countBuckets(start, res.Total)
	seconds := int(res.Total / time.Second)
	if seconds == 0 {
		seconds = 1
	}
	clientPerSec := make([]atomic.Int64, seconds+1)
	var (
		mu            sync.Mutex
		before, after []time.Duration
		errs          atomic.Int64
		wg            sync.WaitGroup
		stop          = make(chan struct{})
		delays        []time.Duration
	)
	if tr, ok := rt.(*transport.Transport); ok && sampleDelay { // sample the adaptive delay
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					var d time.Duration
					for _, h := range tr.Stats().Hosts {
						d = h.HedgeDelay
					}
					delays = append(delays, d)
				}
			}
		}()
	}
	shifted := time.AfterFunc(res.ShiftAt, func() { be.baseDelay.Store(int64(res.After)) })
	defer shifted.Stop()
	for range res.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lb, la []time.Duration
			for {
				t0 := time.Now()
				since := t0.Sub(start)
				if since >= res.Total {
					break
				}
				resp, err := c.Get(url)
				finish(resp)
				l := time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusOK {
					errs.Add(1)
				}
				if s := int(since / time.Second); s < len(clientPerSec) {
					clientPerSec[s].Add(1)
				}
				switch {
				case since < res.ShiftAt:
					lb = append(lb, l)
				case since >= res.ShiftAt+res.Settle:
					la = append(la, l)
				}
			}
			mu.Lock()
			before, after = append(before, lb...), append(after, la...)
			mu.Unlock()
		}()
	}
	time.Sleep(res.Total)
	close(stop)
	wg.Wait()
	time.Sleep(20 * time.Millisecond) // let cancelled losers reach the server's count
	slices.Sort(before)
	slices.Sort(after)
	row := ShiftRow{P99Before: percentile(before, .99), P99After: percentile(after, .99), Errors: errs.Load(), Delays: delays}
	server := be.bucketCounts()
	per := int(time.Second / bucketWidth)
	for s := range seconds {
		var srv int64
		for i := s * per; i < (s+1)*per && i < len(server); i++ {
			srv += server[i]
		}
		cl := clientPerSec[s].Load()
		if cl == 0 {
			continue
		}
		x := float64(srv)/float64(cl) - 1
		row.ExtraLoad = append(row.ExtraLoad, x)
		row.MaxExtraLoad = max(row.MaxExtraLoad, x)
	}
	if n := len(delays); n > 0 {
		final := delays[n-1]
		shiftIdx := int(res.ShiftAt / (100 * time.Millisecond))
		conv := -1
		for i := n - 1; i >= shiftIdx && i >= 0; i-- {
			if d := delays[i]; d < final*3/4 || d > final*5/4 {
				break
			}
			conv = i
		}
		if conv >= 0 {
			row.Converged = time.Duration(conv-shiftIdx+1) * 100 * time.Millisecond
		}
	}
	return row, nil
}

func (res *ShiftResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Latency shift under adaptive hedging\n\n")
	fmt.Fprintf(w, "Every answer takes %v, then from %v into the run %v; the server serves at most %d requests at once "+
		"(the others wait their turn). %d goroutines for %v. "+
		"p99 before the shift, and of requests started %v or more after it; extra load is the server's "+
		"requests over the client's, per second of the run.\n\n",
		res.Before, res.ShiftAt, res.After, res.Capacity, res.Workers, res.Total, res.Settle)
	fmt.Fprintf(w, "| candidate | p99 before | p99 after | extra load per second | max extra load | delay converged after | errors |\n")
	fmt.Fprintf(w, "|---|---:|---:|---|---:|---:|---:|\n")
	for _, r := range res.Rows {
		per := ""
		for i, x := range r.ExtraLoad {
			if i > 0 {
				per += " "
			}
			per += fmt.Sprintf("%.1f%%", 100*x)
		}
		conv := "–"
		if len(r.Delays) > 0 {
			conv = fmt.Sprintf("%v (to %s)", r.Converged, fmtDur(r.Delays[len(r.Delays)-1]))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f%% | %s | %d |\n", r.Name, fmtDur(r.P99Before), fmtDur(r.P99After),
			per, 100*r.MaxExtraLoad, conv, r.Errors)
	}
}
