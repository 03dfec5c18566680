package resilience_test

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/MrVSiK/gotry/resilience"
)

// fuzzConstruct builds a backoff and reports the panic message, if any.
func fuzzConstruct(build func() resilience.Backoff) (b resilience.Backoff, panicMsg string) {
	defer func() {
		if r := recover(); r != nil {
			panicMsg = fmt.Sprint(r)
		}
	}()
	return build(), ""
}

// expOracle is base·2^(retry−1) capped at max, computed exactly.
func expOracle(base, maxD time.Duration, retry int) time.Duration {
	retry = max(retry, 1)
	if retry-1 > 200 {
		if base == 0 {
			return 0
		}
		return maxD
	}
	v := new(big.Int).Lsh(big.NewInt(int64(base)), uint(retry-1))
	if v.Cmp(big.NewInt(int64(maxD))) > 0 {
		return maxD
	}
	return time.Duration(v.Int64())
}

// FuzzBackoff builds each strategy from arbitrary parameters and asks it for
// arbitrary retries. A constructor panics (with a message naming it) exactly
// when its parameters are invalid; a valid strategy never panics and returns
// a delay in its documented range: never negative, never above max,
// Exponential exactly base·2^(retry−1) capped, the jitters within their
// share of it.
func FuzzBackoff(f *testing.F) {
	for _, s := range []struct {
		kind        uint8
		base, maxD  int64
		retry       int
		prev, calls int64
	}{
		{0, int64(time.Second), 0, 3, 0, 1},
		{1, int64(100 * time.Millisecond), int64(5 * time.Second), 64, 0, 3},
		{2, 1, math.MaxInt64, math.MaxInt, math.MaxInt64, 3},
		{3, math.MaxInt64 / 2, math.MaxInt64, 2, 0, 3},
		{4, int64(time.Millisecond), int64(time.Minute), 1, math.MaxInt64, 5},
		{4, 0, 0, -5, -1, 2},
		{1, 5, 4, 1, 0, 1},   // max below base
		{2, -1, 10, 1, 0, 1}, // negative base
		{0, -1, 0, 1, 0, 1},  // negative constant
	} {
		f.Add(s.kind, s.base, s.maxD, s.retry, s.prev, s.calls)
	}
	names := []string{"Constant", "Exponential", "ExponentialJitter", "EqualJitter", "DecorrelatedJitter"}
	f.Fuzz(func(t *testing.T, kind uint8, base, maxD int64, retry int, prev, calls int64) {
		k := int(kind) % len(names)
		b, d0, dMax := time.Duration(base), time.Duration(base), time.Duration(maxD)
		ctors := []func() resilience.Backoff{
			func() resilience.Backoff { return resilience.Constant(b) },
			func() resilience.Backoff { return resilience.Exponential(b, dMax) },
			func() resilience.Backoff { return resilience.ExponentialJitter(b, dMax) },
			func() resilience.Backoff { return resilience.EqualJitter(b, dMax) },
			func() resilience.Backoff { return resilience.DecorrelatedJitter(b, dMax) },
		}
		valid := b >= 0 && (k == 0 || dMax >= 0 && dMax >= b)
		bo, msg := fuzzConstruct(ctors[k])
		if !valid {
			if msg == "" {
				t.Fatalf("%s(%v, %v) accepted invalid parameters", names[k], b, dMax)
			}
			if !strings.HasPrefix(msg, "resilience: "+names[k]+": ") {
				t.Fatalf("%s panic message %q does not name the constructor", names[k], msg)
			}
			return
		}
		if msg != "" {
			t.Fatalf("%s(%v, %v) panicked on valid parameters: %s", names[k], b, dMax, msg)
		}
		p := time.Duration(prev)
		exp := expOracle(b, dMax, retry)
		for range max(1, min(calls, 8)) {
			d := bo.Delay(retry, p)
			if d < 0 {
				t.Fatalf("%s(%v, %v).Delay(%d, %v) = %v, negative", names[k], b, dMax, retry, p, d)
			}
			switch k {
			case 0:
				if d != d0 {
					t.Fatalf("Constant(%v) = %v", d0, d)
				}
			case 1:
				if d != exp {
					t.Fatalf("Exponential(%v, %v).Delay(%d) = %v, want %v", b, dMax, retry, d, exp)
				}
			case 2:
				if d > exp {
					t.Fatalf("ExponentialJitter(%v, %v).Delay(%d) = %v, above %v", b, dMax, retry, d, exp)
				}
			case 3:
				if d > exp || d < exp/2 {
					t.Fatalf("EqualJitter(%v, %v).Delay(%d) = %v, outside [%v, %v]", b, dMax, retry, d, exp/2, exp)
				}
			case 4:
				if d > dMax || d < b {
					t.Fatalf("DecorrelatedJitter(%v, %v).Delay(%d, %v) = %v, outside [base, max]", b, dMax, retry, p, d)
				}
			}
			p = d
		}
	})
}
