package resilience

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBudgetFloorAllowsMinPerSecond(t *testing.T) {
	b := newRetryBudget(0, 3)
	for i := 0; i < 3; i++ {
		if !b.Withdraw(t0) {
			t.Fatalf("withdrawal %d refused within the floor", i+1)
		}
	}
	if b.Withdraw(t0.Add(999 * time.Millisecond)) {
		t.Fatal("fourth withdrawal in the same second allowed")
	}
	if !b.Withdraw(t0.Add(time.Second)) {
		t.Fatal("floor did not refill in the next second")
	}
}

func TestBudgetRatioOfRequests(t *testing.T) {
	b := newRetryBudget(0.5, 0)
	for i := 0; i < 10; i++ {
		b.Deposit(t0)
	}
	got := 0
	for b.Withdraw(t0) {
		got++
	}
	if got != 5 {
		t.Fatalf("withdrew %d, want 5 (0.5 x 10 requests)", got)
	}
	if tok := b.Tokens(t0); tok != 0 {
		t.Fatalf("Tokens = %v after spending all", tok)
	}
}

func TestBudgetDepositsExpireAfterWindow(t *testing.T) {
	b := newRetryBudget(1, 0)
	b.Deposit(t0)
	if got := b.Tokens(t0.Add(budgetWindow - time.Second)); got != 1 {
		t.Fatalf("Tokens inside the window = %v, want 1", got)
	}
	if b.Withdraw(t0.Add(budgetWindow)) {
		t.Fatal("a deposit older than the window was spent")
	}
}

func TestBudgetZeroIsNil(t *testing.T) {
	b := newRetryBudget(0, 0)
	if b != nil {
		t.Fatal("newRetryBudget(0, 0) is not nil")
	}
	b.Deposit(t0)
	if !b.Withdraw(t0) || !math.IsInf(b.Tokens(t0), 1) {
		t.Fatal("nil budget must allow everything")
	}
}

func TestNewBudgetRejectsNonsense(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		min   int
		want  string
	}{
		{math.NaN(), 0, "ratio"},
		{-0.1, 0, "ratio"},
		{math.Inf(1), 0, "ratio"},
		{0.1, -1, "minPerSec"},
	} {
		if msg := panicMessage(func() { newRetryBudget(c.ratio, c.min) }); !strings.Contains(msg, c.want) {
			t.Errorf("newRetryBudget(%v, %d) panic %q, want mention of %s", c.ratio, c.min, msg, c.want)
		}
	}
}

// TestBudgetNeverExceedsRatioPlusFloor: under any sequence of requests and
// retry attempts over time, the retries granted inside any window (the
// budget's window: the current second and the nine before it) that ends with
// a retry paid from deposits never exceed ratio × requests in that window
// plus the floor for each of its seconds. Sequences start anywhere, including
// just before an epoch wrap. (A window whose last second's retries all came
// from the floor may see more: its earlier retries may have spent deposits
// made before it; TestBudgetBoundOverAnyInterval checks the bound for those.
// This test once checked every window and failed, about once in a few
// thousand sequences, on seed 5233551859249980147.)
func TestBudgetNeverExceedsRatioPlusFloor(t *testing.T) {
	starts := []time.Time{t0, time.Unix(0, 0)}
	for _, w := range budgetWraps {
		starts = append(starts, w.at)
	}
	rapid.Check(t, func(t *rapid.T) {
		ratio := rapid.Float64Range(0, 2).Draw(t, "ratio")
		minPS := rapid.IntRange(0, 5).Draw(t, "minPerSec")
		b := newRetryBudget(ratio, minPS)
		if b == nil {
			return
		}
		var granted, fromDeposits, requests []time.Time
		now := rapid.SampledFrom(starts).Draw(t, "start").Add(-time.Duration(rapid.Int64Range(0, int64(20*time.Second)).Draw(t, "before")))
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "dt")))
			if rapid.Bool().Draw(t, "isRetry") {
				if tok, ok := b.take(now); ok {
					granted = append(granted, now)
					if paidFromDeposits(b, tok) {
						fromDeposits = append(fromDeposits, now)
					}
				}
				continue
			}
			b.Deposit(now)
			requests = append(requests, now)
		}
		// Check the window of every grant paid from deposits.
		for _, at := range fromDeposits {
			end := at.Truncate(time.Second).Add(time.Second)
			start := end.Add(-budgetWindow)
			g, r := countIn(granted, start, end), countIn(requests, start, end)
			limit := math.Floor(ratio*float64(r)) + float64(minPS)*budgetWindow.Seconds()
			if float64(g) > limit {
				t.Fatalf("window ending %v: %d retries granted, limit %v (ratio %v, %d requests, floor %d/s)", end, g, limit, ratio, r, minPS)
			}
		}
	})
}

// paidFromDeposits reports whether tok was paid from b's deposits (not from
// its per-second floor).
func paidFromDeposits(b *retryBudget, tok budgetToken) bool {
	for i := range b.spent {
		if tok.w == &b.spent[i] {
			return true
		}
	}
	return false
}

// TestBudgetWindowEndingInFloorRetrySeesEarlierDeposits pins why the window
// bound holds only for windows that end with a retry paid from deposits: at
// ratio 0.5 and a floor of 1/s, 14 requests in second 0 save 7 tokens, and
// one request in each of seconds 1 to 10 lets each of seconds 1 to 9 spend
// one of them (a second pays no more than it earned, rounded up: 0.5 → 1).
// The window of seconds 1 to 10 holds 10 requests, ⌊0.5 × 10⌋ = 5 tokens,
// and ends with a retry paid from the floor (the window's deposits are
// spent): 9 of its retries were paid from deposits.
func TestBudgetWindowEndingInFloorRetrySeesEarlierDeposits(t *testing.T) {
	b := newRetryBudget(0.5, 1)
	for range 14 {
		b.Deposit(t0)
	}
	fromDeposits := 0
	var last budgetToken
	for s := 1; s <= 10; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		b.Deposit(now)
		for {
			tok, ok := b.take(now)
			if !ok {
				break
			}
			if paidFromDeposits(b, tok) {
				fromDeposits++
			}
			last = tok
		}
	}
	if fromDeposits != 9 {
		t.Fatalf("%d retries in seconds 1 to 10 paid from deposits, want 9", fromDeposits)
	}
	if paidFromDeposits(b, last) {
		t.Fatal("the last retry of second 10 was paid from deposits, want the floor")
	}
}

// TestBudgetFloorTopsUpDeposits: the floor pays what the window's deposits,
// spread over its ten seconds, fall short of minPerSec a second.
func TestBudgetFloorTopsUpDeposits(t *testing.T) {
	tests := []struct {
		name     string
		perSec   int // requests a second, for ten seconds
		wantFrom int // retries from the floor in the last second
	}{
		{"no traffic: the whole floor", 0, 10},
		{"deposits of 5 a second: half", 50, 5},
		{"deposits of 9.5 a second: rounded up, 1", 95, 1},
		{"deposits of 10 a second: none", 100, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newRetryBudget(0.1, 10)
			for s := range 10 {
				for range tc.perSec {
					b.Deposit(t0.Add(time.Duration(s) * time.Second))
				}
			}
			now := t0.Add(9 * time.Second)
			for range 1000 { // failures enough that the deposits pay nothing
				b.Fail(now, true)
			}
			got := 0
			for b.Withdraw(now) {
				got++
			}
			if got != tc.wantFrom {
				t.Errorf("withdrew %d, want %d from the floor", got, tc.wantFrom)
			}
		})
	}
}

// countIn counts the times in [start, end).
func countIn(ts []time.Time, start, end time.Time) int {
	n := 0
	for _, x := range ts {
		if !x.Before(start) && x.Before(end) {
			n++
		}
	}
	return n
}

func TestBudgetConcurrentWithdrawalsNeverOverspend(t *testing.T) {
	b := newRetryBudget(0.1, 0)
	for i := 0; i < 1000; i++ {
		b.Deposit(t0)
	}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if b.Withdraw(t0) {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := granted.Load(); got > 100 || got < 90 {
		t.Fatalf("granted %d concurrent withdrawals, want about 100 and never more", got)
	}
}

// budgetWraps are instants at which a budget epoch could wrap: the 24-bit
// epochs of an earlier design (the 108th fell on 2027-06-02 12:28:48 UTC),
// 2^32 seconds, and the wrap of the current epoch modulus.
var budgetWraps = []struct {
	name string
	at   time.Time
}{
	{"2^24 s x 107", time.Unix(107<<24, 0)},
	{"2^24 s x 108 (2027-06-02)", time.Unix(108<<24, 0)},
	{"2^32 s", time.Unix(1<<32, 0)},
	{"epoch modulus", time.Unix(epochMod, 0)},
	{"twice the epoch modulus", time.Unix(2*epochMod, 0)},
}

// TestBudgetExactAcrossEpochWrap: a window that straddles a wrap of the
// bucket epoch still holds its ten seconds apart. At ratio 1, ten requests
// pay for ten retries within the window, however the withdrawals are spread
// over it (an earlier 24-bit epoch let two seconds share a bucket at the
// wrap, and these ten requests paid for twenty retries within six seconds).
func TestBudgetExactAcrossEpochWrap(t *testing.T) {
	for _, w := range budgetWraps {
		t.Run(w.name, func(t *testing.T) {
			b := newRetryBudget(1, 0)
			start := w.at.Add(-5 * time.Second)
			for i := 0; i < 10; i++ {
				b.Deposit(start)
			}
			granted := 0
			for s := 0; s < 10; s++ {
				now := start.Add(time.Duration(s)*time.Second + 500*time.Millisecond)
				for b.Withdraw(now) {
					granted++
				}
				if tok := b.Tokens(now); tok != 0 {
					t.Fatalf("Tokens %v after spending at %v", tok, now)
				}
			}
			if granted != 10 {
				t.Fatalf("10 requests at ratio 1 paid for %d retries within one window", granted)
			}
		})
	}
}

// TestBudgetBoundOverAnyInterval checks the bound the Budget documents for
// intervals of any alignment: the retries granted in an interval I no longer
// than budgetWindow number at most minPerSec × S + ⌊ratio × R⌋, S being the
// whole seconds I touches (at most 11) and R the requests from nine seconds
// before I's first second through its last second.
func TestBudgetBoundOverAnyInterval(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ratio := rapid.OneOf(rapid.Just(0.0), rapid.Just(0.5), rapid.Float64Range(0, 2)).Draw(t, "ratio")
		minPS := rapid.IntRange(0, 5).Draw(t, "minPerSec")
		b := newRetryBudget(ratio, minPS)
		if b == nil {
			return
		}
		var granted, requests []time.Time
		now := t0.Add(time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(t, "offset")))
		// Bursts (several events in one instant) and retries three times as
		// likely as requests, so the floor and the deposits run out.
		dt := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, int64(1200*time.Millisecond)))
		steps := rapid.IntRange(1, 400).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			now = now.Add(time.Duration(dt.Draw(t, "dt")))
			if rapid.IntRange(0, 3).Draw(t, "kind") > 0 {
				if b.Withdraw(now) {
					granted = append(granted, now)
				}
				continue
			}
			b.Deposit(now)
			requests = append(requests, now)
		}
		// Intervals starting at arbitrary points, of arbitrary lengths up to
		// the window: from every grant, and from points drawn at random.
		starts := append([]time.Time(nil), granted...)
		for i := rapid.IntRange(0, 20).Draw(t, "extra"); i > 0; i-- {
			starts = append(starts, t0.Add(time.Duration(rapid.Int64Range(int64(-time.Second), int64(now.Sub(t0))).Draw(t, "start"))))
		}
		for _, a := range starts {
			for _, d := range []time.Duration{budgetWindow, budgetWindow - time.Nanosecond,
				time.Duration(rapid.Int64Range(0, int64(budgetWindow)).Draw(t, "length"))} {
				end := a.Add(d) // the interval is [a, end], both ends included
				first, last := a.Unix(), end.Unix()
				g := countIn(granted, a, end.Add(time.Nanosecond))
				r := countIn(requests, time.Unix(first-9, 0), time.Unix(last+1, 0))
				seconds := last - first + 1
				limit := float64(int64(minPS)*seconds) + math.Floor(ratio*float64(r))
				if float64(g) > limit {
					t.Fatalf("[%v, %v]: %d retries granted, bound %v (ratio %v, %d requests, floor %d/s over %d seconds)",
						a, end, g, limit, ratio, r, minPS, seconds)
				}
			}
		}
	})
}

// TestBudgetUnalignedIntervalTouchesElevenSeconds pins the example the Budget
// documents: an interval not aligned to whole seconds touches one second more
// than a window, so at minPerSec 5 and no requests, 55 retries launch between
// 0.9 s and 10.0 s (9.1 s), not 50.
func TestBudgetUnalignedIntervalTouchesElevenSeconds(t *testing.T) {
	b := newRetryBudget(0, 5)
	granted := 0
	for _, at := range []time.Duration{900 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond,
		3500 * time.Millisecond, 4500 * time.Millisecond, 5500 * time.Millisecond, 6500 * time.Millisecond,
		7500 * time.Millisecond, 8500 * time.Millisecond, 9500 * time.Millisecond, 10 * time.Second} {
		for b.Withdraw(t0.Add(at)) {
			granted++
		}
	}
	if granted != 55 {
		t.Fatalf("granted %d retries between 0.9s and 10.0s, want 55 (5 in each of 11 seconds)", granted)
	}
}

// TestBudgetFailuresTakeBackDeposits: a retryable error takes back one
// request's deposit and a timeout a whole token, within the window like the
// deposits.
func TestBudgetFailuresTakeBackDeposits(t *testing.T) {
	tests := []struct {
		name             string
		errors, timeouts int
		want             int
	}{
		{"no failures", 0, 0, 5},
		{"four errors take back 0.5 x 4", 4, 0, 3},
		{"two timeouts take back a token each", 0, 2, 3},
		{"both", 2, 1, 3},
		{"failures costing more than the deposits", 0, 6, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newRetryBudget(0.5, 0)
			for range 10 {
				b.Deposit(t0)
			}
			for range tc.errors {
				b.Fail(t0, false)
			}
			for range tc.timeouts {
				b.Fail(t0, true)
			}
			if got := b.Tokens(t0); got != float64(tc.want) {
				t.Errorf("Tokens = %v, want %d", got, tc.want)
			}
			got := 0
			for b.Withdraw(t0.Add(500 * time.Millisecond)) {
				got++
			}
			if got != tc.want {
				t.Errorf("withdrew %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBudgetFailuresExpireWithTheWindow(t *testing.T) {
	b := newRetryBudget(0.5, 0)
	for range 4 {
		b.Fail(t0, true)
	}
	later := t0.Add(budgetWindow)
	for range 4 {
		b.Deposit(later)
	}
	if got := b.Tokens(later); got != 2 {
		t.Fatalf("Tokens = %v once the timeouts left the window, want 2", got)
	}
	if b.Tokens(later.Add(-time.Second)) != 0 {
		t.Fatal("timeouts inside the window did not count")
	}
}

// TestBudgetPaysNoMoreInASecondThanItEarned: ten seconds of calm traffic
// save ratio × ten seconds of deposits, but a retry is paid from them only
// if its own second has earned it too.
func TestBudgetPaysNoMoreInASecondThanItEarned(t *testing.T) {
	b := newRetryBudget(0.1, 0)
	for s := range 10 {
		for range 100 {
			b.Deposit(t0.Add(time.Duration(s) * time.Second))
		}
	}
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{9*time.Second + 100*time.Millisecond, 10}, // second 9 earned 10
		{10*time.Second + 100*time.Millisecond, 0}, // second 10 nothing
		{11*time.Second + 100*time.Millisecond, 0}, // nor second 11
	} {
		got := 0
		for b.Withdraw(t0.Add(tc.at)) {
			got++
		}
		if got != tc.want {
			t.Errorf("at %v: withdrew %d, want %d", tc.at, got, tc.want)
		}
	}
	if got := b.Tokens(t0.Add(9 * time.Second)); got != 90 {
		t.Errorf("Tokens = %v, want 90 (100 in the window, 10 spent)", got)
	}
	// Traffic again: it pays, up to what its second earned.
	for range 50 {
		b.Deposit(t0.Add(13 * time.Second))
	}
	got := 0
	for b.Withdraw(t0.Add(13 * time.Second)) {
		got++
	}
	if got != 5 {
		t.Errorf("after 50 requests: withdrew %d, want 5", got)
	}
}

// TestBudgetStopsPayingWhileTimeoutsDominate is the overload of issue 23
// in the budget's terms: 100 requests a second succeed for ten seconds,
// then every attempt times out and asks for a retry. The window has saved
// 100 tokens, but only the outage's first second pays from them, less than
// the 10 a second deposits; then nothing (the deposits earn more than the
// floor of 2, so there is none), until the outage's seconds leave the
// window after it ends.
func TestBudgetStopsPayingWhileTimeoutsDominate(t *testing.T) {
	b := newRetryBudget(0.1, 2)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for s := range 10 {
		for range 100 {
			b.Deposit(sec(s))
		}
	}
	paid := map[int]int{}
	for s := 10; s < 15; s++ { // the outage: a second's requests, then their timeouts
		now := sec(s)
		for range 100 {
			b.Deposit(now)
		}
		for range 100 {
			b.Fail(now, true)
			for b.Withdraw(now) { // every retry times out too
				paid[s]++
				b.Fail(now, true)
			}
		}
	}
	if paid[10] >= 10 || paid[10] == 0 {
		t.Errorf("the outage's first second paid %d retries, want some, fewer than a second's deposits (10)", paid[10])
	}
	for s := 11; s < 15; s++ {
		if paid[s] != 0 {
			t.Errorf("second %d of the outage paid %d retries, want none", s-10, paid[s])
		}
	}
	for s := 15; s < 25; s++ { // calm again
		for range 100 {
			b.Deposit(sec(s))
		}
	}
	if got := b.Tokens(sec(22)); got != 0 { // the window: seconds 13 to 22
		t.Errorf("Tokens = %v while the outage is in the window, want 0", got)
	}
	if got := b.Tokens(sec(24)); got <= 0 { // seconds 15 to 24
		t.Errorf("Tokens = %v once the outage has left the window, want deposits again", got)
	}
}

// timeoutErr is an operation's own error that says it is a timeout, as
// net.Error and net/http's are.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

// TestEngineChargesFailedAttemptsToTheBudget: the engine charges every
// attempt with a retryable result, retried or not, at its cost: a
// retryable error takes back one call's deposit, a timeout (the operation's
// own, or the per-attempt timeout's) a whole token; a success or an error
// that is not retryable costs nothing beyond its deposit.
func TestEngineChargesFailedAttemptsToTheBudget(t *testing.T) {
	tests := []struct {
		name       string
		step       step
		timeout    time.Duration // per-attempt
		wantTokens float64       // 10 calls at ratio 0.5 deposit 5; two of them are step
	}{
		{"successes", step{v: 200}, 0, 5},
		{"an error that is not retryable", step{err: errBoom}, 0, 5},
		{"retryable errors take back their deposits", step{v: 503, retryable: true}, 0, 4},
		{"timeouts of the operation cost a token each", step{err: timeoutErr{}, retryable: true}, 0, 3},
		{"per-attempt timeouts cost a token each", step{block: true}, time.Millisecond, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The real clock, for the per-attempt timeout; the ten calls'
			// tokens are the window's, whichever seconds they fall in.
			e := NewEngine(EngineConfig{BudgetRatio: 0.5})
			for i := range 10 {
				op := &scripted{steps: []step{{v: 200}}}
				if i >= 8 {
					op.steps[0] = tc.step
				}
				Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 1, PerAttemptTimeout: tc.timeout}})
			}
			if got := e.Stats().BudgetTokens; got != tc.wantTokens {
				t.Errorf("BudgetTokens = %v after 10 calls, want %v", got, tc.wantTokens)
			}
		})
	}
	t.Run("two retryable errors per call", func(t *testing.T) {
		// On the fake clock, so that all of it falls in one second: the
		// retry must be earned by its own second too.
		e := newTestEngine(fakeclock.New(t0), nil, EngineConfig{BudgetRatio: 0.5})
		for range 20 {
			Execute(context.Background(), e, Call[int]{Op: &scripted{steps: []step{{v: 200}}}, Policy: Policy{MaxAttempts: 1}})
		}
		op := &scripted{steps: []step{{v: 503, retryable: true}}}
		Execute(context.Background(), e, Call[int]{Op: op, Policy: Policy{MaxAttempts: 2}})
		if op.Calls() != 2 {
			t.Fatalf("%d attempts, want 2 (the retry paid from 10.5 deposited)", op.Calls())
		}
		// 21 deposits (10.5), two failures (1), one retry (1).
		if got := e.Stats().BudgetTokens; got != 8.5 {
			t.Errorf("BudgetTokens = %v, want 8.5", got)
		}
	})
}
