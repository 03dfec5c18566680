package demo

import (
	"math"
	"sync"
	"time"
)

// Latency histogram: log-scale buckets, eight per doubling (about 9% wide),
// from histMin up; bucket i holds durations in (histMin·2^((i-1)/8),
// histMin·2^(i/8)]. Bounded memory whatever the run length.
const (
	histMin     = 100 * time.Microsecond
	histPerOct  = 8
	histBuckets = 21 * histPerOct // up to histMin·2^21 ≈ 210s; longer lands in the last
)

type histogram struct {
	counts [histBuckets]int64
	n      int64
}

func bucketOf(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	i := int(math.Ceil(math.Log2(float64(d)/float64(histMin)) * histPerOct))
	return min(i, histBuckets-1)
}

// upper is bucket i's upper bound.
func upper(i int) time.Duration {
	return time.Duration(float64(histMin) * math.Exp2(float64(i)/histPerOct))
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range &o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the upper bound of the bucket holding quantile q, or 0
// for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range &h.counts {
		seen += c
		if seen >= rank {
			return upper(i)
		}
	}
	return upper(histBuckets - 1)
}

// latencyWindow keeps an all-time histogram and one per second for the last
// windowSecs seconds. Safe for concurrent use.
type latencyWindow struct {
	mu    sync.Mutex // guards everything below
	all   histogram
	slots [windowSecs]struct {
		sec int64
		h   histogram
	}
}

const windowSecs = 10

// add records d, which ended at now.
func (w *latencyWindow) add(now time.Time, d time.Duration) {
	sec := now.Unix()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.add(d)
	s := &w.slots[sec%windowSecs]
	if s.sec != sec {
		s.sec, s.h = sec, histogram{}
	}
	s.h.add(d)
}

// recent returns the merged histogram of the windowSecs seconds up to now.
func (w *latencyWindow) recent(now time.Time) histogram {
	sec := now.Unix()
	var out histogram
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.slots {
		if s := &w.slots[i]; s.sec > sec-windowSecs && s.sec <= sec {
			out.merge(&s.h)
		}
	}
	return out
}

// total returns a copy of the all-time histogram.
func (w *latencyWindow) total() histogram {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all
}
