package resilience

import (
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestExponentialDoublesAndCaps(t *testing.T) {
	b := Exponential(100*time.Millisecond, time.Second)
	cases := []struct {
		retry int
		want  time.Duration
	}{
		{0, 100 * time.Millisecond}, // below 1 is treated as the first retry
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{63, time.Second},
		{64, time.Second},
		{math.MaxInt, time.Second},
	}
	for _, c := range cases {
		if got := b.Delay(c.retry, 0); got != c.want {
			t.Errorf("Delay(%d) = %v, want %v", c.retry, got, c.want)
		}
	}
}

func TestConstant(t *testing.T) {
	if got := Constant(3*time.Second).Delay(99, time.Hour); got != 3*time.Second {
		t.Fatalf("Constant = %v", got)
	}
}

func TestBackoffFunc(t *testing.T) {
	var f Backoff = BackoffFunc(func(retry int, prev time.Duration) time.Duration { return time.Duration(retry)*time.Second + prev })
	if got := f.Delay(2, time.Second); got != 3*time.Second {
		t.Fatalf("got %v", got)
	}
}

// TestJitterStrategiesStayInBounds checks every strategy against its
// documented range for arbitrary configurations and retry numbers, including
// ones that would overflow a naive shift.
func TestJitterStrategiesStayInBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := time.Duration(rapid.Int64Range(0, math.MaxInt64/2).Draw(t, "base"))
		maxD := base + time.Duration(rapid.Int64Range(0, math.MaxInt64-int64(base)).Draw(t, "extra"))
		retry := rapid.IntRange(math.MinInt32, math.MaxInt).Draw(t, "retry")
		prev := time.Duration(rapid.Int64Range(0, math.MaxInt64).Draw(t, "prev"))
		exp := Exponential(base, maxD).Delay(retry, prev)
		if exp < 0 || exp > maxD || exp < min(base, maxD) && base > 0 {
			t.Fatalf("Exponential(%v,%v).Delay(%d) = %v", base, maxD, retry, exp)
		}
		if d := ExponentialJitter(base, maxD).Delay(retry, prev); d < 0 || d > exp {
			t.Fatalf("ExponentialJitter = %v, want [0, %v]", d, exp)
		}
		if d := EqualJitter(base, maxD).Delay(retry, prev); d < exp/2 || d > exp {
			t.Fatalf("EqualJitter = %v, want [%v, %v]", d, exp/2, exp)
		}
		if d := DecorrelatedJitter(base, maxD).Delay(retry, prev); d < base || d > maxD {
			t.Fatalf("DecorrelatedJitter = %v, want [%v, %v]", d, base, maxD)
		}
	})
}

func TestDecorrelatedJitterGrowsFromPrevious(t *testing.T) {
	b := DecorrelatedJitter(10*time.Millisecond, time.Hour)
	for i := 0; i < 1000; i++ {
		d := b.Delay(1, time.Second)
		if d < 10*time.Millisecond || d > 3*time.Second {
			t.Fatalf("Delay = %v, want within [10ms, 3s]", d)
		}
	}
}

func TestBackoffConstructorsRejectNonsense(t *testing.T) {
	cases := []struct {
		name string
		fn   func()
		want string
	}{
		{"constant negative", func() { Constant(-1) }, "Constant"},
		{"exponential negative base", func() { Exponential(-1, time.Second) }, "Exponential: base"},
		{"full jitter negative max", func() { ExponentialJitter(0, -1) }, "ExponentialJitter: max"},
		{"equal jitter max below base", func() { EqualJitter(time.Second, time.Millisecond) }, "EqualJitter: max"},
		{"decorrelated max below base", func() { DecorrelatedJitter(time.Second, 0) }, "DecorrelatedJitter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := panicMessage(c.fn)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("panic %q does not name %q", msg, c.want)
			}
		})
	}
}

// panicMessage runs fn and returns what it panicked with ("" if it did not).
func panicMessage(fn func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = r.(string)
		}
	}()
	fn()
	return ""
}
