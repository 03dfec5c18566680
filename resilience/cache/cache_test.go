package cache_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/MrVSiK/gotry/internal/clock/fakeclock"
	"github.com/MrVSiK/gotry/internal/testwait"
	"github.com/MrVSiK/gotry/resilience/cache"
)

// waitLimit bounds every real-time wait in these tests; see testwait.
const waitLimit = testwait.Limit

var epoch = testwait.Epoch

// eventually polls cond until it holds, failing the test after waitLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func mustCache[K comparable, V any](t *testing.T, cfg cache.Config) *cache.Cache[K, V] {
	t.Helper()
	c, err := cache.New[K, V](cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return c
}

// result is what one Get returned.
type result[V any] struct {
	v   V
	err error
}

// getAsync runs Get on a new goroutine and delivers its result.
func getAsync[K comparable, V any](ctx context.Context, c *cache.Cache[K, V], key K, load func(context.Context) (V, error)) <-chan result[V] {
	ch := make(chan result[V], 1)
	go func() {
		v, err := c.Get(ctx, key, load)
		ch <- result[V]{v, err}
	}()
	return ch
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		cfg    cache.Config
		option string
	}{
		{"negative max entries", cache.Config{MaxEntries: -1}, "MaxEntries"},
		{"negative TTL", cache.Config{TTL: -time.Second}, "TTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cache.New[string, int](tt.cfg)
			var ce *cache.ConfigError
			if !errors.As(err, &ce) || ce.Option != tt.option || ce.Config != "cache.Config" {
				t.Fatalf("New error = %v, want a *ConfigError naming cache.Config.%s", err, tt.option)
			}
		})
	}
}

func TestCacheHitReturnsCachedValueWithoutLoading(t *testing.T) {
	c := mustCache[string, int](t, cache.Config{})
	var loads atomic.Int32
	load := func(context.Context) (int, error) { return int(loads.Add(1)) * 10, nil }
	for i := range 3 {
		v, err := c.Get(context.Background(), "k", load)
		if err != nil || v != 10 {
			t.Fatalf("Get #%d = %d, %v; want 10, nil", i+1, v, err)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("load ran %d times, want 1", n)
	}
	if v, ok := c.Peek("k"); !ok || v != 10 {
		t.Errorf("Peek = %d, %v; want 10, true", v, ok)
	}
	if _, ok := c.Peek("other"); ok {
		t.Error("Peek of a missing key reported a hit")
	}
}

func TestCacheConcurrentMissesShareOneLoad(t *testing.T) {
	const callers = 100
	tests := []struct {
		name    string
		loadErr error
	}{
		{"success is shared", nil},
		{"error is shared", errors.New("backend down")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache[string, string](t, cache.Config{})
			var loads atomic.Int32
			release := make(chan struct{})
			load := func(context.Context) (string, error) {
				loads.Add(1)
				<-release
				return "value", tt.loadErr
			}
			results := make([]<-chan result[string], callers)
			for i := range results {
				results[i] = getAsync(context.Background(), c, "k", load)
			}
			eventually(t, "every caller to wait for the load", func() bool {
				return cache.Waiters(c, "k") == callers
			})
			close(release)
			for i, ch := range results {
				r := testwait.Recv(t, ch, "a caller's result")
				if r.err != tt.loadErr {
					t.Errorf("caller %d got error %v, want %v", i, r.err, tt.loadErr)
				}
			}
			if n := loads.Load(); n != 1 {
				t.Errorf("%d callers caused %d loads, want 1", callers, n)
			}
		})
	}
}

func TestCacheErrorsAreNotCached(t *testing.T) {
	c := mustCache[string, int](t, cache.Config{})
	errDown := errors.New("down")
	var loads atomic.Int32
	load := func(context.Context) (int, error) {
		if loads.Add(1) == 1 {
			return 0, errDown
		}
		return 42, nil
	}
	if _, err := c.Get(context.Background(), "k", load); !errors.Is(err, errDown) {
		t.Fatalf("first Get error = %v, want %v", err, errDown)
	}
	if c.Len() != 0 {
		t.Errorf("Len after a failed load = %d, want 0", c.Len())
	}
	if v, err := c.Get(context.Background(), "k", load); err != nil || v != 42 {
		t.Fatalf("second Get = %d, %v; want a fresh load's 42, nil", v, err)
	}
	if n := loads.Load(); n != 2 {
		t.Errorf("load ran %d times, want 2", n)
	}
}

func TestCacheEntriesExpireAfterTTL(t *testing.T) {
	const ttl = time.Minute
	clk := fakeclock.New(epoch)
	c := mustCache[string, int](t, cache.ConfigWithClock(cache.Config{TTL: ttl}, clk))
	var loads atomic.Int32
	load := func(context.Context) (int, error) { return int(loads.Add(1)), nil }

	steps := []struct {
		advance time.Duration
		want    int // value Get returns, i.e. the load that produced it
	}{
		{0, 1},
		{ttl - time.Nanosecond, 1},
		{time.Nanosecond, 2}, // exactly TTL after the load: expired
		{ttl / 2, 2},
		{ttl / 2, 3},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		if v, err := c.Get(context.Background(), "k", load); err != nil || v != s.want {
			t.Fatalf("step %d: Get = %d, %v; want %d, nil", i, v, err, s.want)
		}
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := mustCache[string, string](t, cache.Config{MaxEntries: 3})
	load := func(key string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return "v-" + key, nil }
	}
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.Get(ctx, k, load(k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "d"} { // a is now the most recently used; b the least
		if _, err := c.Get(ctx, k, load(k)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
	for _, tc := range []struct {
		key     string
		present bool
	}{{"a", true}, {"b", false}, {"c", true}, {"d", true}} {
		if _, ok := c.Peek(tc.key); ok != tc.present {
			t.Errorf("Peek(%q) present = %v, want %v", tc.key, ok, tc.present)
		}
	}
}

func TestCacheReclaimsExpiredEntriesBeforeEvictingLiveOnes(t *testing.T) {
	const ttl = time.Minute
	clk := fakeclock.New(epoch)
	c := mustCache[string, int](t, cache.ConfigWithClock(cache.Config{MaxEntries: 2, TTL: ttl}, clk))
	ctx := context.Background()
	load := func(context.Context) (int, error) { return 1, nil }

	get := func(key string) {
		t.Helper()
		if _, err := c.Get(ctx, key, load); err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
	}
	get("old") // expires at ttl
	clk.Advance(ttl / 2)
	get("live")          // expires at 1.5 ttl
	get("old")           // a hit: "old" is now the most recently used
	clk.Advance(ttl / 2) // "old" has expired, "live" has not
	get("new")

	// Plain LRU would have evicted "live" here.
	if _, ok := c.Peek("live"); !ok {
		t.Error(`"live" was evicted although an expired entry could be reclaimed`)
	}
	if n := c.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
}

func TestCacheSizeBoundAndConsistencyProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const ttl = time.Minute
		maxEntries := rapid.IntRange(1, 8).Draw(rt, "maxEntries")
		clk := fakeclock.New(epoch)
		c, err := cache.New[int, string](cache.ConfigWithClock(
			cache.Config{MaxEntries: maxEntries, TTL: ttl}, clk))
		if err != nil {
			rt.Fatal(err)
		}
		ops := rapid.IntRange(1, 200).Draw(rt, "ops")
		for range ops {
			key := rapid.IntRange(0, 20).Draw(rt, "key")
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				c.Delete(key)
			case 1:
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(ttl)).Draw(rt, "advance")))
			case 2:
				if v, ok := c.Peek(key); ok && v != fmt.Sprint(key) {
					rt.Fatalf("Peek(%d) = %q", key, v)
				}
			default:
				v, err := c.Get(context.Background(), key, func(context.Context) (string, error) {
					return fmt.Sprint(key), nil
				})
				if err != nil || v != fmt.Sprint(key) {
					rt.Fatalf("Get(%d) = %q, %v", key, v, err)
				}
			}
			if n := c.Len(); n > maxEntries {
				rt.Fatalf("Len = %d, above MaxEntries %d", n, maxEntries)
			}
		}
	})
}

func TestCacheWaiterLeavingDoesNotCancelSharedLoad(t *testing.T) {
	c := mustCache[string, string](t, cache.Config{})
	release := make(chan struct{})
	loadCtxs := make(chan context.Context, 1)
	load := func(ctx context.Context) (string, error) {
		loadCtxs <- ctx
		<-release
		return "shared", ctx.Err()
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := getAsync(ctxA, c, "k", load)
	b := getAsync(context.Background(), c, "k", load)
	loadCtx := testwait.Recv(t, loadCtxs, "the load to start")
	eventually(t, "both callers to wait", func() bool { return cache.Waiters(c, "k") == 2 })

	cancelA()
	if r := testwait.Recv(t, a, "the cancelled caller"); !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled caller got %q, %v; want context.Canceled", r.v, r.err)
	}
	if err := loadCtx.Err(); err != nil {
		t.Errorf("the load's context ended (%v) although a caller still waits", err)
	}
	close(release)
	if r := testwait.Recv(t, b, "the remaining caller"); r.err != nil || r.v != "shared" {
		t.Errorf("remaining caller got %q, %v; want shared, nil", r.v, r.err)
	}
	if v, ok := c.Peek("k"); !ok || v != "shared" {
		t.Errorf("Peek = %q, %v; want the shared load's result cached", v, ok)
	}
}

func TestCacheLastWaiterLeavingCancelsTheLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c := mustCache[string, string](t, cache.Config{})
	var loads atomic.Int32
	cancelled := make(chan error, 1)
	load := func(ctx context.Context) (string, error) {
		if loads.Add(1) > 1 {
			return "fresh", nil
		}
		<-ctx.Done()
		cancelled <- ctx.Err()
		return "stale", nil // a result nobody wants; it must not be cached
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := getAsync(ctx, c, "k", load)
	eventually(t, "the caller to wait", func() bool { return cache.Waiters(c, "k") == 1 })
	cancel()
	if got := testwait.Recv(t, r, "the cancelled caller"); !errors.Is(got.err, context.Canceled) {
		t.Errorf("caller got %q, %v; want context.Canceled", got.v, got.err)
	}
	if err := testwait.Recv(t, cancelled, "the abandoned load's cancellation"); !errors.Is(err, context.Canceled) {
		t.Errorf("abandoned load saw %v, want context.Canceled", err)
	}
	v, err := c.Get(context.Background(), "k", load)
	if err != nil || v != "fresh" {
		t.Errorf("Get after abandonment = %q, %v; want a fresh load", v, err)
	}
}

func TestCacheLoadPanicReachesEveryWaiter(t *testing.T) {
	const callers = 10
	c := mustCache[string, int](t, cache.Config{})
	release := make(chan struct{})
	var loads atomic.Int32
	load := func(context.Context) (int, error) {
		if loads.Add(1) == 1 {
			<-release
			panic("loader exploded")
		}
		return 7, nil
	}
	results := make([]<-chan result[int], callers)
	for i := range results {
		results[i] = getAsync(context.Background(), c, "k", load)
	}
	eventually(t, "every caller to wait", func() bool { return cache.Waiters(c, "k") == callers })
	close(release)
	for i, ch := range results {
		r := testwait.Recv(t, ch, "a caller's result")
		var pe *cache.PanicError
		if !errors.Is(r.err, cache.ErrPanic) || !errors.As(r.err, &pe) || pe.Value != "loader exploded" {
			t.Errorf("caller %d got %d, %v; want the load's panic as a *PanicError", i, r.v, r.err)
		}
	}
	if v, err := c.Get(context.Background(), "k", load); err != nil || v != 7 {
		t.Errorf("Get after the panic = %d, %v; want a fresh load (panics are not cached)", v, err)
	}
}

func TestCacheLoadGoexitDoesNotStrandWaiters(t *testing.T) {
	c := mustCache[string, int](t, cache.Config{})
	v, err := c.Get(context.Background(), "k", func(context.Context) (int, error) {
		runtime.Goexit()
		return 1, nil
	})
	if err == nil || errors.Is(err, cache.ErrPanic) {
		t.Errorf("Get with a load that called Goexit = %d, %v; want a non-panic error", v, err)
	}
	if c.Len() != 0 {
		t.Errorf("Len = %d, want 0", c.Len())
	}
}

func TestCacheDeleteForgetsLoadInFlight(t *testing.T) {
	c := mustCache[string, string](t, cache.Config{})
	releases := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var loads atomic.Int32
	load := func(context.Context) (string, error) {
		n := loads.Add(1)
		<-releases[n-1]
		return fmt.Sprintf("v%d", n), nil
	}
	first := getAsync(context.Background(), c, "k", load)
	eventually(t, "the first caller to wait", func() bool { return cache.Waiters(c, "k") == 1 })
	c.Delete("k")
	second := getAsync(context.Background(), c, "k", load)
	eventually(t, "the second load to start", func() bool { return loads.Load() == 2 })

	close(releases[0])
	if r := testwait.Recv(t, first, "the first caller"); r.v != "v1" {
		t.Errorf("first caller got %q, %v; want v1 from the load it joined", r.v, r.err)
	}
	if v, ok := c.Peek("k"); ok {
		t.Errorf("the forgotten load's result %q was cached", v)
	}
	close(releases[1])
	if r := testwait.Recv(t, second, "the second caller"); r.v != "v2" {
		t.Errorf("second caller got %q, %v; want v2", r.v, r.err)
	}
	if v, ok := c.Peek("k"); !ok || v != "v2" {
		t.Errorf("Peek = %q, %v; want v2", v, ok)
	}
}

func TestCacheDoneContext(t *testing.T) {
	c := mustCache[string, int](t, cache.Config{})
	var loads atomic.Int32
	load := func(context.Context) (int, error) { return int(loads.Add(1)), nil }
	done, cancel := context.WithCancel(context.Background())
	cancel()

	if v, err := c.Get(done, "miss", load); !errors.Is(err, context.Canceled) || loads.Load() != 0 {
		t.Errorf("miss with a done context = %d, %v after %d loads; want context.Canceled and no load", v, err, loads.Load())
	}
	if _, err := c.Get(context.Background(), "hit", load); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(done, "hit", load); err != nil || v != 1 {
		t.Errorf("hit with a done context = %d, %v; want the cached 1", v, err)
	}
}

type ctxKey struct{}

func TestCacheLoadContextKeepsValuesNotDeadline(t *testing.T) {
	c := mustCache[string, string](t, cache.Config{})
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "trace-1"), time.Hour)
	defer cancel()
	v, err := c.Get(ctx, "k", func(ctx context.Context) (string, error) {
		if _, ok := ctx.Deadline(); ok {
			return "", errors.New("load inherited the caller's deadline")
		}
		s, _ := ctx.Value(ctxKey{}).(string)
		return s, nil
	})
	if err != nil || v != "trace-1" {
		t.Errorf("Get = %q, %v; want the caller's context value and no deadline", v, err)
	}
}

func TestCacheHitDoesNotAllocate(t *testing.T) {
	c := mustCache[string, []string](t, cache.Config{TTL: time.Hour})
	ctx := context.Background()
	load := func(context.Context) ([]string, error) { return []string{"x"}, nil }
	if _, err := c.Get(ctx, "k", load); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := c.Get(ctx, "k", load); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a hit allocates %v times, want 0", allocs)
	}
}

func TestCacheIsSafeForConcurrentUse(t *testing.T) {
	c := mustCache[int, int](t, cache.Config{MaxEntries: 16, TTL: time.Hour})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				key := (g*7 + i) % 40
				v, err := c.Get(context.Background(), key, func(context.Context) (int, error) { return key * 2, nil })
				if err != nil || v != key*2 {
					t.Errorf("Get(%d) = %d, %v", key, v, err)
					return
				}
				if i%50 == 0 {
					c.Delete(key)
				}
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 16 {
		t.Errorf("Len = %d, above MaxEntries 16", n)
	}
}

func BenchmarkCacheGetHit(b *testing.B) {
	c, err := cache.New[string, []string](cache.Config{TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	load := func(context.Context) ([]string, error) { return []string{"10.0.0.1"}, nil }
	if _, err := c.Get(ctx, "example.com", load); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(ctx, "example.com", load); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCacheGetHitParallel(b *testing.B) {
	c, err := cache.New[string, []string](cache.Config{TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	load := func(context.Context) ([]string, error) { return []string{"10.0.0.1"}, nil }
	if _, err := c.Get(ctx, "example.com", load); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(ctx, "example.com", load); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkCacheGetMiss(b *testing.B) {
	c, err := cache.New[int, int](cache.Config{MaxEntries: 1024})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	load := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Get(ctx, i, load); err != nil { // every key is new: load, store and evict
			b.Fatal(err)
		}
	}
}
