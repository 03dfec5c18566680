package jitter_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/MrVSiK/gotry/internal/jitter"
)

// drawMin and drawMax pin a draw to the ends of [0, n).
func drawMin(int64) int64   { return 0 }
func drawMax(n int64) int64 { return n - 1 }

// TestBoundsAreClosed pins the documented bounds: with the random source at
// either end of its range, every function returns exactly the end of its
// interval, so both ends are reachable.
func TestBoundsAreClosed(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"Uniform low", jitter.Uniform(10*ms, 20*ms, drawMin), 10 * ms},
		{"Uniform high", jitter.Uniform(10*ms, 20*ms, drawMax), 20 * ms},
		{"Uniform empty range", jitter.Uniform(10*ms, 10*ms, drawMax), 10 * ms},
		{"Uniform inverted range", jitter.Uniform(10*ms, 5*ms, drawMax), 10 * ms},
		{"Uniform widest range stops one short", jitter.Uniform(0, math.MaxInt64, drawMax), math.MaxInt64 - 1},
		{"Full low", jitter.Full(100*ms, drawMin), 0},
		{"Full high", jitter.Full(100*ms, drawMax), 100 * ms},
		{"Full of zero", jitter.Full(0, drawMax), 0},
		{"Full of negative", jitter.Full(-ms, drawMax), 0},
		{"Equal low", jitter.Equal(100*ms, drawMin), 50 * ms},
		{"Equal high", jitter.Equal(100*ms, drawMax), 100 * ms},
		{"Equal of odd rounds half down", jitter.Equal(3, drawMin), 1},
		{"Equal of one nanosecond high", jitter.Equal(1, drawMax), 1},
		{"Equal of negative", jitter.Equal(-ms, drawMax), 0},
		{"Add low", jitter.Add(100*ms, 10*ms, drawMin), 100 * ms},
		{"Add high", jitter.Add(100*ms, 10*ms, drawMax), 110 * ms},
		{"Add no jitter", jitter.Add(100*ms, 0, drawMax), 100 * ms},
		{"Add negative jitter", jitter.Add(100*ms, -ms, drawMax), 100 * ms},
		{"Add to negative", jitter.Add(-ms, 10*ms, drawMin), 0},
		{"Add saturates", jitter.Add(math.MaxInt64-5, time.Second, drawMax), math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// genDraw picks the random source: the real one or one pinned to either end.
func genDraw(t *rapid.T) func(int64) int64 {
	return rapid.SampledFrom([]func(int64) int64{rand.Int64N, drawMin, drawMax}).Draw(t, "draw")
}

func genDuration(t *rapid.T, label string) time.Duration {
	return time.Duration(rapid.OneOf(
		rapid.Int64Range(-10, 1000),
		rapid.Int64Range(0, int64(time.Hour)),
		rapid.Int64(),
	).Draw(t, label))
}

func TestUniformStaysInRangeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lo := time.Duration(rapid.Int64Range(0, math.MaxInt64).Draw(t, "lo"))
		hi := genDuration(t, "hi")
		got := jitter.Uniform(lo, hi, genDraw(t))
		if got < lo || got > max(lo, hi) {
			t.Fatalf("Uniform(%v, %v) = %v, outside [lo, max(lo, hi)]", lo, hi, got)
		}
	})
}

func TestFullAndEqualStayInRangeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDuration(t, "d")
		draw := genDraw(t)
		top := max(d, 0)
		if got := jitter.Full(d, draw); got < 0 || got > top {
			t.Fatalf("Full(%v) = %v, outside [0, %v]", d, got, top)
		}
		if got := jitter.Equal(d, draw); got < top/2 || got > top {
			t.Fatalf("Equal(%v) = %v, outside [%v, %v]", d, got, top/2, top)
		}
	})
}

func TestAddStaysInRangeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, j := genDuration(t, "d"), genDuration(t, "j")
		got := jitter.Add(d, j, genDraw(t))
		floor := max(d, 0)
		switch {
		case got < floor:
			t.Fatalf("Add(%v, %v) = %v, below %v", d, j, got, floor)
		case j <= 0 && got != floor:
			t.Fatalf("Add(%v, %v) = %v, want %v unchanged", d, j, got, floor)
		case j > 0 && floor <= math.MaxInt64-j && got > floor+j:
			t.Fatalf("Add(%v, %v) = %v, above %v", d, j, got, floor+j)
		}
	})
}

func BenchmarkAdd(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		jitter.Add(time.Second, 100*time.Millisecond, rand.Int64N)
	}
}
