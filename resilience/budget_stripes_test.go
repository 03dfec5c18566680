package resilience

import (
	"sync"
	"testing"
	"time"
	"unsafe"
)

// TestBudgetConcurrentDepositsAllCount: deposits from many goroutines at
// once, spread over the stripes (distinct nanoseconds) or all at one instant
// (one stripe until they collide), are each counted exactly once: at ratio
// 1, n deposits pay for exactly n retries.
func TestBudgetConcurrentDepositsAllCount(t *testing.T) {
	const goroutines, each = 8, 500
	tests := []struct {
		name string
		at   func(g, i int) time.Time
	}{
		{"distinct instants", func(g, i int) time.Time { return t0.Add(time.Duration(g*each+i) * 7) }},
		{"one instant", func(int, int) time.Time { return t0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newRetryBudget(1, 0)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						b.Succeed(tc.at(g, i), budgetToken{})
					}
				}()
			}
			wg.Wait()
			now := t0.Add(500 * time.Millisecond)
			if got := b.Tokens(now); got != goroutines*each {
				t.Fatalf("Tokens = %v after %d deposits", got, goroutines*each)
			}
			granted := 0
			for b.Withdraw(now) {
				granted++
			}
			if granted != goroutines*each {
				t.Fatalf("%d deposits paid for %d retries", goroutines*each, granted)
			}
		})
	}
}

// TestBudgetDepositsStayOnTheirStripe: deposits take the stripe their
// processor holds (so a core keeps writing the same cache line); stripe
// numbers are handed out round robin, so holders of different stripes
// spread over all of them; every deposit is counted wherever it lands.
func TestBudgetDepositsStayOnTheirStripe(t *testing.T) {
	b := newRetryBudget(1, 0)
	e := epochOf(t0)
	count := func() (used int, total int64) {
		for s := range b.successes {
			c := read(&b.successes[s].buckets[e%budgetBuckets], e)
			if c > 0 {
				used++
			}
			total += c
		}
		return used, total
	}
	for range 64 {
		b.Succeed(t0, budgetToken{})
	}
	if used, total := count(); total != 64 || (used != 1 && !raceEnabled) {
		// (The race detector empties pools at random, so there a run of
		// deposits may change stripes.)
		t.Fatalf("64 deposits on one goroutine: %d deposits over %d stripes, want 64 on 1", total, used)
	}
	// Stripe numbers as the pool makes them: one after the other.
	seen := map[int]bool{}
	for range successStripes {
		seen[*b.stripes.New().(*int)] = true
	}
	if len(seen) != successStripes {
		t.Fatalf("%d new stripe holders got %d distinct stripes", successStripes, len(seen))
	}
}

// TestBudgetLayoutKeepsHotWordsApart pins what the padding in retryBudget
// is for: the words that deposits write (each stripe's buckets) are at least
// a cache line (64 bytes) away from any other stripe's words and from the
// fields retries and failures write, and the fields every deposit reads (ratio) are a
// cache line away from those retries write; and the whole stays small.
func TestBudgetLayoutKeepsHotWordsApart(t *testing.T) {
	var b retryBudget
	const line = 64
	stripe := unsafe.Sizeof(successStripe{})
	words := unsafe.Sizeof(b.successes[0].buckets)
	if gap := stripe - words; gap < line {
		t.Errorf("stripes' words %d bytes apart, want at least %d", gap, line)
	}
	if gap := unsafe.Offsetof(b.successes) - (unsafe.Offsetof(b.timeouts) + unsafe.Sizeof(b.timeouts)); gap < line {
		t.Errorf("the first stripe is %d bytes after timeouts, want at least %d", gap, line)
	}
	if gap := unsafe.Offsetof(b.spent) - (unsafe.Offsetof(b.held) + unsafe.Sizeof(b.held)); gap < line {
		t.Errorf("spent is %d bytes after the reserve, want at least %d", gap, line)
	}
	if n := unsafe.Sizeof(b); n > 1800 {
		t.Errorf("a budget takes %d bytes; its doc says about 1.7 KiB", n)
	}
}
