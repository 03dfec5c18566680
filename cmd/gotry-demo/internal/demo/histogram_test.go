package demo

import (
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.001, time.Millisecond}}
	for _, tt := range tests {
		got := h.quantile(tt.q)
		// A bucket is about 9% wide and quantile returns its upper bound.
		if got < tt.want || float64(got) > float64(tt.want)*1.1 {
			t.Errorf("quantile(%v) = %v, want %v to +10%%", tt.q, got, tt.want)
		}
	}
	var empty histogram
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}
}

func TestHistogramExtremes(t *testing.T) {
	var h histogram
	h.add(0)
	h.add(time.Hour)
	if got := h.quantile(0); got != histMin {
		t.Errorf("smallest bucket bound %v, want %v", got, histMin)
	}
	if got := h.quantile(1); got < 100*time.Second {
		t.Errorf("largest bucket bound %v, want >= 100s", got)
	}
}

// The window forgets seconds older than windowSecs; the total does not.
func TestLatencyWindowForgets(t *testing.T) {
	var w latencyWindow
	t0 := time.Unix(1000, 0)
	w.add(t0, time.Second)
	w.add(t0.Add(windowSecs*time.Second), time.Millisecond)
	recent := w.recent(t0.Add(windowSecs * time.Second))
	if recent.n != 1 || recent.quantile(1) > 2*time.Millisecond {
		t.Fatalf("recent window holds %d samples, max %v; want only the 1ms one", recent.n, recent.quantile(1))
	}
	if total := w.total(); total.n != 2 {
		t.Fatalf("total holds %d samples, want 2", total.n)
	}
}
