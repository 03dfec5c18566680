package bench

import (
	"testing"
	"time"
)

// TestCrowdServerShapes checks the fleet server against its own
// arithmetic: a fastfail server refuses a request that would wait longer
// than Queue requests take, a FIFO one never refuses; every distribution
// keeps the mean service time; microbursts keep the mean rate.
func TestCrowdServerShapes(t *testing.T) {
	f := CrowdConfig{Shape: "fastfail", Capacity: 2, Queue: 2, Service: 10 * time.Millisecond}
	if err := f.setDefaults(false); err != nil {
		t.Fatal(err)
	}
	s := newCrowdServer(&f, time.Now(), time.Second, 0, 0, 1)
	defer s.Close()
	now := time.Now()
	var refused int
	for range 6 { // 2 served at once, 2 waiting, then refused
		if _, ok := s.book(now); !ok {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("fastfail, 2 workers and a queue of 2: %d of 6 refused at once, want 2", refused)
	}

	for _, dist := range []string{"fixed", "lognormal", "pareto"} {
		g := CrowdConfig{Dist: dist, Capacity: 1, Service: time.Millisecond}
		if err := g.setDefaults(false); err != nil {
			t.Fatal(err)
		}
		s := newCrowdServer(&g, time.Now(), time.Second, 0, 0, 2)
		now := time.Now()
		var end time.Time
		const n = 200_000
		for range n {
			end, _ = s.book(now)
		}
		s.Close()
		mean := end.Sub(now) / n
		if mean < 900*time.Microsecond || mean > 1100*time.Microsecond {
			t.Errorf("%s: mean service %v, want about 1ms", dist, mean)
		}
	}

	for _, burst := range []float64{0, 3} {
		at := crowdArrivals(1000, 20*time.Second, burst, 3)
		if n := len(at); n < 19_000 || n > 21_000 {
			t.Errorf("burst %g: %d arrivals in 20 s at 1000/s", burst, n)
		}
	}
}
