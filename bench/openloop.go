package bench

import (
	"net/http"
	"sync"
	"time"
)

// record is one request of an open-loop run; times are offsets from the
// run's start.
type record struct {
	start, end time.Duration
	ok         bool // 200 with no error
	open       bool // refused by gotry's circuit breaker
	shed       bool // refused locally, before reaching the server (see isShed)
}

// openLoop offers requests at a fixed rate for d, whatever the latency, with
// at most maxInflight outstanding (beyond that the driver waits, and the
// achieved rate falls; the tables report it). onResult, if set, sees each
// result as it arrives. It returns when every request has finished.
func openLoop(c *http.Client, url string, rate float64, d time.Duration, t0 time.Time, onResult func(err error)) []record {
	const maxInflight = 512
	n := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	recs := make([]record, n)
	sem := make(chan struct{}, maxInflight)
	var wg sync.WaitGroup
	for i := range n {
		if w := time.Until(t0.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := &recs[i]
			r.start = time.Since(t0)
			resp, err := c.Get(url)
			finish(resp)
			r.end = time.Since(t0)
			r.ok = err == nil && resp.StatusCode == http.StatusOK
			r.open = isCircuitOpen(err)
			if onResult != nil {
				onResult(err)
			}
		}()
	}
	wg.Wait()
	return recs
}
