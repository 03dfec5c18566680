package transporttest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
	"github.com/MrVSiK/gotry/transport/transporttest"
)

// observed counts what gotry's hooks report.
type observed struct {
	mu          sync.Mutex
	retries     int
	hedges      int
	transitions []string // "host: from→to"
}

func (o *observed) hooks() transport.Hooks {
	return transport.Hooks{
		OnRetry: func(resilience.RetryEvent) { o.mu.Lock(); o.retries++; o.mu.Unlock() },
		OnHedge: func(resilience.HedgeEvent) { o.mu.Lock(); o.hedges++; o.mu.Unlock() },
		OnBreakerStateChange: func(e resilience.BreakerStateEvent) {
			o.mu.Lock()
			o.transitions = append(o.transitions, fmt.Sprintf("%s: %v→%v", e.Key, e.From, e.To))
			o.mu.Unlock()
		},
	}
}

func (o *observed) snapshot() (retries, hedges int, transitions []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retries, o.hedges, slices.Clone(o.transitions)
}

// gotryUnderTest is gotry with everything that arms timers or keeps
// per-host state turned on: retries with a backoff, hedging, a per-attempt
// timeout, the retry budget (a reserve large enough not to refuse here),
// the breaker (open for open) and the concurrency limit. unit scales every
// other duration.
func gotryUnderTest(rt http.RoundTripper, unit, open time.Duration, o *observed) *http.Client {
	return &http.Client{Transport: transport.New(rt,
		transport.WithMaxAttempts(3),
		transport.WithBackoff(resilience.Constant(unit)),
		transport.WithHedging(unit/5, 1),
		transport.WithPerAttemptTimeout(3*unit),
		transport.WithRetryBudget(0.1, 100),
		transport.WithBreaker(resilience.BreakerConfig{FailureThreshold: 3, OpenDuration: open}),
		transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{InitialLimit: 2, MinLimit: 1, MaxLimit: 2, MaxWait: unit / 20}),
		transport.WithHooks(o.hooks()),
	)}
}

// noHedge is the context of a request that must not be hedged.
func noHedge() context.Context {
	return transport.WithPolicy(context.Background(), transport.Policy{MaxHedges: -1})
}

// call sends a GET through client and returns "status body" or the error.
func call(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b), err
}

// countFor returns how many requests rt received for pattern.
func countFor(rt *transporttest.RoundTripper, pattern string) int {
	n := 0
	for _, r := range rt.Requests() {
		if r.Pattern == pattern {
			n++
		}
	}
	return n
}

// gotry runs inside synctest bubbles and outside them in one test binary,
// in both orders: the wall clock's shared state (the current second that
// the retry budget reads, refreshed by a timer) must neither leak out of a
// bubble (a timer made in one, reset outside it, is a fatal error of the
// runtime) nor into one (the budget would count wall seconds while the
// bubble's time moves). So the first subtest is a bubble: nothing before it
// in this binary runs gotry on the wall clock. A Transport, like the
// RoundTripper under it, is made and used inside one bubble only.
func TestGotryInsideAndOutsideSynctestBubbles(t *testing.T) {
	t.Run("bubble first", func(t *testing.T) { synctest.Test(t, testGotryInABubble) })
	t.Run("outside after a bubble", testGotryOnTheWallClock)
	t.Run("bubble after outside", func(t *testing.T) { synctest.Test(t, testGotryInABubble) })
	t.Run("budget in a bubble after outside", func(t *testing.T) { synctest.Test(t, testBudgetRefillsOnVirtualSeconds) })
	t.Run("outside again", testGotryOnTheWallClock)
}

// testGotryInABubble runs gotry on the bubble's virtual time: every wait
// (backoff, hedge delay, per-attempt timeout, the breaker's open period,
// the limit's wait, the steps' latencies) passes at once and exactly.
func testGotryInABubble(t *testing.T) {
	const unit = time.Second
	rt := transporttest.New(nil)
	rt.Handle("retry.test/", transporttest.Steps(transporttest.Status(503), transporttest.Status(200).WithBody("ok")))
	rt.Handle("hedge.test/", transporttest.Steps(
		transporttest.Status(200).WithBody("slow").After(5*unit),
		transporttest.Status(200).WithBody("fast").After(unit/100)))
	rt.Handle("hang.test/", transporttest.Steps(transporttest.Hang(), transporttest.Status(200).WithBody("ok")))
	rt.Handle("down.test/", transporttest.Steps(transporttest.Status(503), transporttest.Status(503), transporttest.Status(503)).
		Then(transporttest.Status(200).WithBody("back")))
	rt.Handle("busy.test/", transporttest.Steps(transporttest.Status(200).WithBody("done").After(unit)))
	o := &observed{}
	client := gotryUnderTest(rt, unit, 10*unit, o)

	type check struct {
		name     string
		run      func() (string, error)
		want     string
		elapsed  time.Duration // exact: virtual time
		attempts int           // requests rt received for the pattern
		pattern  string
	}
	checks := []check{
		{"a 503 is retried after the backoff", func() (string, error) { return call(context.Background(), client, "http://retry.test/") },
			"200 ok", unit, 2, "retry.test/"},
		{"a slow attempt is hedged", func() (string, error) { return call(context.Background(), client, "http://hedge.test/") },
			"200 fast", unit/5 + unit/100, 2, "hedge.test/"},
		{"a hung attempt times out and is retried", func() (string, error) { return call(noHedge(), client, "http://hang.test/") },
			"200 ok", 3*unit + unit, 2, "hang.test/"},
		{"failures open the breaker", func() (string, error) { return call(context.Background(), client, "http://down.test/") },
			"503 ", 2 * unit, 3, "down.test/"},
	}
	for _, c := range checks {
		start := time.Now()
		got, err := c.run()
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
		if el := time.Since(start); el != c.elapsed {
			t.Errorf("%s: took %v of virtual time, want exactly %v", c.name, el, c.elapsed)
		}
		if n := countFor(rt, c.pattern); n != c.attempts {
			t.Errorf("%s: %d attempts, want %d", c.name, n, c.attempts)
		}
	}

	// The open breaker refuses at once, sending nothing; after its open
	// period a probe goes through and closes it.
	if _, err := call(noHedge(), client, "http://down.test/"); !errors.Is(err, transport.ErrCircuitOpen) {
		t.Errorf("request to an open breaker: %v, want ErrCircuitOpen", err)
	}
	if n := countFor(rt, "down.test/"); n != 3 {
		t.Errorf("the open breaker let a request through: %d attempts, want 3", n)
	}
	time.Sleep(10 * unit)
	if got, err := call(noHedge(), client, "http://down.test/"); err != nil || got != "200 back" {
		t.Errorf("probe after the open period: %q, %v; want 200 back", got, err)
	}

	// Two requests in flight fill the limit of 2; a third waits MaxWait for
	// a permit and is shed, and nothing of it is sent.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if got, err := call(noHedge(), client, "http://busy.test/"); err != nil || got != "200 done" {
				t.Errorf("request within the limit: %q, %v", got, err)
			}
		})
	}
	synctest.Wait() // both are in their latency
	start := time.Now()
	if _, err := call(noHedge(), client, "http://busy.test/"); !errors.Is(err, resilience.ErrOverloaded) {
		t.Errorf("request over the limit: %v, want ErrOverloaded", err)
	}
	if el := time.Since(start); el != unit/20 {
		t.Errorf("the shed request waited %v, want exactly MaxWait %v", el, unit/20)
	}
	wg.Wait()
	if n := countFor(rt, "busy.test/"); n != 2 {
		t.Errorf("%d requests reached busy.test, want the 2 within the limit", n)
	}

	retries, hedges, transitions := o.snapshot()
	if retries != 4 || hedges != 1 {
		t.Errorf("hooks saw %d retries and %d hedges, want 4 and 1", retries, hedges)
	}
	wantTransitions := []string{"down.test: closed→open", "down.test: open→half-open", "down.test: half-open→closed"}
	if !slices.Equal(transitions, wantTransitions) {
		t.Errorf("breaker transitions %q, want %q", transitions, wantTransitions)
	}
	// The hedge's loser was cancelled and waited for; every body gotry
	// did not return was closed.
	synctest.Wait()
	for _, r := range rt.Requests() {
		if !r.Done {
			t.Errorf("request %d (%s) still in flight", r.N, r.URL)
		}
	}
	if n := rt.Unclosed(); n != 0 {
		t.Errorf("%d response bodies left open", n)
	}
	// End idle for a few virtual seconds, as a test may: whatever gotry
	// keeps ticking on the wall clock must not have been started in here.
	time.Sleep(3 * unit)
}

// testBudgetRefillsOnVirtualSeconds checks that the retry budget counts
// the bubble's seconds: its reserve, refilled by a success at most once a
// second, refills after a virtual second and not within one. (On the wall
// clock's shared second, which a use outside a bubble keeps ticking in
// real time, a virtual second would not count.)
func testBudgetRefillsOnVirtualSeconds(t *testing.T) {
	rt := transporttest.New(nil)
	rt.Handle("/fail", transporttest.Steps(transporttest.Status(503)))
	rt.Handle("/ok", transporttest.Steps(transporttest.Status(200)))
	client := &http.Client{Transport: transport.New(rt,
		transport.WithMaxAttempts(2),
		transport.WithBackoff(resilience.Constant(0)),
		transport.WithRetryBudget(0, 1))} // no deposits: only the reserve of 1 pays

	steps := []struct {
		sleep    time.Duration
		path     string
		attempts int
	}{
		{0, "/fail", 2},         // the reserve pays the retry
		{0, "/fail", 1},         // empty: no retry
		{time.Second, "/ok", 1}, // a success refills it
		{0, "/fail", 2},         // so this retry is paid
		{0, "/ok", 1},           // a second success in the same second refills nothing
		{0, "/fail", 1},         // so no retry
		{time.Second, "/ok", 1}, // a virtual second later, a success refills
		{0, "/fail", 2},         // and the retry is paid
	}
	for i, s := range steps {
		time.Sleep(s.sleep)
		before := rt.Count()
		if _, err := call(context.Background(), client, "http://budget.test"+s.path); err != nil {
			t.Fatal(err)
		}
		if n := rt.Count() - before; n != s.attempts {
			t.Errorf("step %d (%s after %v): %d attempts, want %d", i, s.path, s.sleep, n, s.attempts)
		}
	}
}

// testGotryOnTheWallClock runs the same mechanisms on the wall clock, with
// short real durations and no assertion on time: each outcome is forced by
// the script (a hung attempt is hedged whatever the machine's speed, and
// the other requests are not hedged at all).
func testGotryOnTheWallClock(t *testing.T) {
	const unit = 20 * time.Millisecond
	rt := transporttest.New(nil)
	rt.Handle("retry.test/", transporttest.Steps(transporttest.Status(503), transporttest.Status(200).WithBody("ok")))
	rt.Handle("hedge.test/", transporttest.Steps(transporttest.Hang(), transporttest.Status(200).WithBody("fast")))
	rt.Handle("down.test/", transporttest.Steps(transporttest.Status(503)))
	o := &observed{}
	client := gotryUnderTest(rt, unit, time.Hour, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()

	// Only the hedge's request is hedged: on the wall clock a slow machine
	// could hedge the others, and their counts would vary.
	unhedged := transport.WithPolicy(ctx, transport.Policy{MaxHedges: -1})
	if got, err := call(unhedged, client, "http://retry.test/"); err != nil || got != "200 ok" {
		t.Errorf("retry: %q, %v", got, err)
	}
	if got, err := call(ctx, client, "http://hedge.test/"); err != nil || got != "200 fast" {
		t.Errorf("hedge: %q, %v", got, err)
	}
	if got, err := call(unhedged, client, "http://down.test/"); err != nil || got != "503 " {
		t.Errorf("down: %q, %v", got, err)
	}
	if _, err := call(ctx, client, "http://down.test/"); !errors.Is(err, transport.ErrCircuitOpen) {
		t.Errorf("request to an open breaker: %v, want ErrCircuitOpen", err)
	}
	got := []int{countFor(rt, "retry.test/"), countFor(rt, "hedge.test/"), countFor(rt, "down.test/")}
	if !slices.Equal(got, []int{2, 2, 3}) {
		t.Errorf("attempts per host %v, want [2 2 3]", got)
	}
	if retries, hedges, _ := o.snapshot(); retries != 3 || hedges != 1 {
		t.Errorf("hooks saw %d retries and %d hedges, want 3 and 1", retries, hedges)
	}
	if n := rt.Unclosed(); n != 0 {
		t.Errorf("%d response bodies left open", n)
	}
}
