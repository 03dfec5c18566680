package bench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"
)

// op is one request as a benchmark makes it; it returns the request's error.
type op func() error

// sample is one timed run of an op.
type sample struct {
	ns, allocs, bytes float64 // per op
}

// measure runs f n times on `workers` goroutines (n split evenly) and
// returns the cost per op. Allocations come from runtime.MemStats, so they
// count every goroutine of the process: on loopback that includes the
// server's share, which is the same for every candidate.
func measure(f op, n, workers int) (sample, error) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	per := max(1, n/workers)
	total := per * workers
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range per {
				if err := f(); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	el := time.Since(t0)
	runtime.ReadMemStats(&m1)
	return sample{
		ns:     float64(el.Nanoseconds()) / float64(total),
		allocs: float64(m1.Mallocs-m0.Mallocs) / float64(total),
		bytes:  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(total),
	}, first
}

// calibrate warms f up for about d and returns how many ops fit in target.
func calibrate(f op, workers int, d, target time.Duration) (int, error) {
	n := workers
	for {
		s, err := measure(f, n, workers)
		if err != nil {
			return 0, err
		}
		if el := time.Duration(s.ns * float64(n)); el >= d || n >= 1<<24 {
			return max(workers, int(float64(target)/s.ns)), nil
		}
		n *= 4
	}
}

// median returns the median of xs (NaN when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile returns the q-quantile (0..1) of sorted durations by the
// nearest-rank method.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0fµs", float64(d)/1e3)
}

// fmtRatio prints a median ratio with its interquartile range.
func fmtRatio(med, lo, hi float64, rounds int, baseline bool) string {
	if rounds <= 1 || baseline {
		return fmt.Sprintf("%.2f×", med)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", med, lo, hi)
}

// quartiles returns the first and third quartiles of xs (linear
// interpolation between closest ranks).
func quartiles(xs []float64) (q1, q3 float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(q float64) float64 {
		pos := q * float64(len(s)-1)
		i := int(pos)
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (pos-float64(i))*(s[i+1]-s[i])
	}
	return at(.25), at(.75)
}
