package cache

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/MrVSiK/gotry/internal/clock"
	"github.com/MrVSiK/gotry/internal/kiterr"
)

// ErrPanic marks the error that stands for a panic in a load function. The
// error is a *PanicError; match it with errors.Is.
var ErrPanic = errors.New("cache: load panicked")

// PanicError is the error the waiters of a panicking load get. Its fields
// are Value, the value passed to panic, and Stack, the panicking goroutine's
// stack trace at the point of recovery. It matches ErrPanic, and unwraps to
// Value when Value is an error. (The type is shared with package periodic,
// whose panics match periodic.ErrPanic instead.)
type PanicError = kiterr.PanicError

// ConfigError is the error New returns for an invalid Config: Config is
// "cache.Config", Option the field's name and Reason what is wrong with it.
// Find it with errors.As. (The type is shared with the other kit packages.)
type ConfigError = kiterr.ConfigError

// defaultMaxEntries is the capacity of a cache whose MaxEntries is 0.
const defaultMaxEntries = 1024

// errLoadGoexit is the error the waiters of a load get when the load
// function called runtime.Goexit instead of returning.
var errLoadGoexit = errors.New("cache: load called runtime.Goexit")

// Config configures a Cache. Its zero value is valid: 1024 entries that
// never expire.
type Config struct {
	// MaxEntries bounds the number of cached values. It must not be
	// negative; 0 means 1024. Loads in flight do not count against it.
	MaxEntries int
	// TTL is how long a loaded value is served before it is loaded again,
	// measured from when its load finished. It must not be negative; 0
	// means values never expire (they are only evicted).
	TTL time.Duration

	// clock tells the time for expiry; nil means the real clock. Tests
	// inject a fake (export_test.go).
	clock clock.Clock
}

// Cache is a bounded, concurrency-safe cache of values that are expensive to
// load, with single-flight loading: however many goroutines miss the same key
// at once, one call to load fetches the value and all of them get its result.
//
// A value is served for TTL after its load finished. Errors are never
// cached: every waiter of a failed load gets its error unchanged, and the
// next Get loads again. A load that panics is recovered and its waiters get a
// *PanicError (matching ErrPanic) instead of hanging; the panic does
// not crash the program. Every caller gets the same V, so a V that holds
// references (a slice, a map, a pointer) must be treated as read-only.
//
// Loads run on a goroutine of their own, with a context that carries the
// values of the context of the Get that started the load but not its
// cancellation or deadline. A caller whose context ends stops waiting at once
// and gets ctx.Err(); the load carries on for the callers still waiting.
// When the last waiter leaves, the load's context is cancelled and the load is
// forgotten, so the next Get starts a fresh one; whatever the abandoned load
// returns is discarded. A load function that ignores its context keeps its
// goroutine until it returns. Apart from loads, a Cache runs no goroutines
// and no timers: expiry is checked when an entry is read or room is needed.
//
// When a new value would exceed MaxEntries, expired entries are reclaimed
// first (oldest first), and if none were, the least recently used entry is
// evicted. A hit counts as a use.
//
// Cost: a hit takes one mutex, one map lookup and, with a TTL, one read of
// the clock, and allocates nothing, provided load is a function value that
// does not need allocating (a closure that captures variables is allocated by
// the caller on every call, since load outlives Get on a miss; check Peek
// first to keep such hits allocation-free). A miss allocates the flight, a
// context and a goroutine. Every method is safe for concurrent use; the zero
// Cache is not usable, build one with New.
type Cache[K comparable, V any] struct {
	maxEntries int
	ttl        time.Duration
	clock      clock.Clock

	mu sync.Mutex // guards everything below
	// entries indexes the cached values. Each entry sits in two lists: by
	// recency of use (mru → lru) and by age of insertion (oldest → newest).
	// With one TTL for all entries, age order is also expiry order.
	entries  map[K]*cacheEntry[K, V]
	mru, lru *cacheEntry[K, V]
	oldest   *cacheEntry[K, V]
	newest   *cacheEntry[K, V]
	flights  map[K]*cacheFlight[V] // loads in flight, by key
}

// cacheEntry is one cached value and its list links; all fields are guarded
// by the cache's mutex.
type cacheEntry[K comparable, V any] struct {
	key          K
	val          V
	expires      time.Time         // zero without a TTL
	newer, older *cacheEntry[K, V] // usage links: newer is more recently used
	next, prev   *cacheEntry[K, V] // age links: next is younger
}

// cacheFlight is one load in flight. val and err are written by the load's
// goroutine before done is closed and only read after it is closed; waiters
// is guarded by the cache's mutex.
type cacheFlight[V any] struct {
	done    chan struct{}
	val     V
	err     error
	cancel  context.CancelFunc // cancels the load's context
	waiters int                // callers still waiting for the result
}

// New validates cfg and returns an empty cache. A negative MaxEntries or TTL
// yields a *ConfigError naming it.
func New[K comparable, V any](cfg Config) (*Cache[K, V], error) {
	const name = "cache.Config"
	switch {
	case cfg.MaxEntries < 0:
		return nil, kiterr.Configf(name, "MaxEntries", "must not be negative, got %d", cfg.MaxEntries)
	case cfg.TTL < 0:
		return nil, kiterr.Configf(name, "TTL", "must not be negative, got %v", cfg.TTL)
	}
	c := &Cache[K, V]{
		maxEntries: cfg.MaxEntries,
		ttl:        cfg.TTL,
		clock:      cfg.clock,
		entries:    make(map[K]*cacheEntry[K, V]),
		flights:    make(map[K]*cacheFlight[V]),
	}
	if c.maxEntries == 0 {
		c.maxEntries = defaultMaxEntries
	}
	if c.clock == nil {
		c.clock = clock.Real()
	}
	return c, nil
}

// Get returns the value cached for key, or loads it with load on a miss.
// Concurrent misses for the same key share one call of load, and all of them
// get its result; a successful result is cached for TTL, an error is not.
//
// On a hit Get returns the value even if ctx has ended. On a miss, Get
// returns ctx.Err() at once if ctx has already ended, and stops waiting with
// ctx.Err() when ctx ends before the load does (see Cache for what becomes of
// the load). A panic in load reaches every waiter as a *PanicError.
func (c *Cache[K, V]) Get(ctx context.Context, key K, load func(ctx context.Context) (V, error)) (V, error) {
	var now time.Time
	if c.ttl > 0 {
		now = c.clock.Now()
	}
	c.mu.Lock()
	if v, ok := c.hitLocked(key, now); ok {
		c.mu.Unlock()
		return v, nil
	}
	if err := ctx.Err(); err != nil {
		c.mu.Unlock()
		var zero V
		return zero, err
	}
	f, ok := c.flights[key]
	if !ok {
		f = &cacheFlight[V]{done: make(chan struct{})}
		var loadCtx context.Context
		loadCtx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
		c.flights[key] = f
		go c.load(loadCtx, key, f, load)
	}
	f.waiters++
	c.mu.Unlock()

	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	f.waiters--
	if f.waiters == 0 {
		// The last waiter left: nobody wants this result any more.
		f.cancel()
		if c.flights[key] == f {
			delete(c.flights, key)
		}
	}
	c.mu.Unlock()
	var zero V
	return zero, ctx.Err()
}

// Peek returns the value cached for key and true, or false when there is no
// live entry. It never loads and never waits for a load in flight. A hit
// counts as a use. Peek never allocates.
func (c *Cache[K, V]) Peek(key K) (V, bool) {
	var now time.Time
	if c.ttl > 0 {
		now = c.clock.Now()
	}
	c.mu.Lock()
	v, ok := c.hitLocked(key, now)
	c.mu.Unlock()
	return v, ok
}

// Delete removes key's value from the cache. A load in flight for key is
// forgotten: its waiters still get its result, but the result is not cached,
// and the next Get starts a new load. Use Delete to invalidate a value that
// is known to have changed.
func (c *Cache[K, V]) Delete(key K) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.removeLocked(e)
	}
	delete(c.flights, key)
	c.mu.Unlock()
}

// Len returns the number of live cached values; loads in flight are not
// counted. It reclaims expired entries as it goes, at amortised O(1) cost.
func (c *Cache[K, V]) Len() int {
	var now time.Time
	if c.ttl > 0 {
		now = c.clock.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reclaimExpiredLocked(now)
	return len(c.entries)
}

// load runs on its own goroutine: it calls fn and hands the result to the
// flight's waiters, whether fn returns, panics or calls runtime.Goexit.
func (c *Cache[K, V]) load(ctx context.Context, key K, f *cacheFlight[V], fn func(context.Context) (V, error)) {
	returned := false
	defer func() {
		if !returned {
			var zero V
			f.val = zero
			if v := recover(); v != nil {
				f.err = kiterr.NewPanicError(ErrPanic, v)
			} else {
				f.err = errLoadGoexit
			}
		}
		f.cancel()
		c.finish(key, f)
	}()
	f.val, f.err = fn(ctx)
	returned = true
}

// finish caches a successful result if the flight is still the current one
// for key, and releases the waiters.
func (c *Cache[K, V]) finish(key K, f *cacheFlight[V]) {
	var now time.Time
	if c.ttl > 0 && f.err == nil {
		now = c.clock.Now()
	}
	c.mu.Lock()
	if c.flights[key] == f {
		delete(c.flights, key)
		if f.err == nil {
			c.storeLocked(key, f.val, now)
		}
	}
	c.mu.Unlock()
	close(f.done)
}

// hitLocked returns key's live value and marks it used, removing it if it has
// expired. It requires c.mu held.
func (c *Cache[K, V]) hitLocked(key K, now time.Time) (V, bool) {
	e, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	if c.ttl > 0 && !now.Before(e.expires) {
		c.removeLocked(e)
		var zero V
		return zero, false
	}
	c.touchLocked(e)
	return e.val, true
}

// storeLocked caches val under key, making room first. It requires c.mu
// held.
func (c *Cache[K, V]) storeLocked(key K, val V, now time.Time) {
	if e, ok := c.entries[key]; ok {
		// Only reachable if a value was stored while this load ran, which
		// the flight bookkeeping prevents; replace it all the same.
		c.removeLocked(e)
	}
	if len(c.entries) >= c.maxEntries {
		c.reclaimExpiredLocked(now)
	}
	for len(c.entries) >= c.maxEntries && c.lru != nil {
		c.removeLocked(c.lru)
	}
	e := &cacheEntry[K, V]{key: key, val: val}
	if c.ttl > 0 {
		e.expires = now.Add(c.ttl)
	}
	c.entries[key] = e
	// Newest in age order, most recent in usage order.
	e.prev = c.newest
	if c.newest != nil {
		c.newest.next = e
	} else {
		c.oldest = e
	}
	c.newest = e
	c.pushFrontLocked(e)
}

// reclaimExpiredLocked removes expired entries, oldest first. It requires
// c.mu held.
func (c *Cache[K, V]) reclaimExpiredLocked(now time.Time) {
	if c.ttl <= 0 {
		return
	}
	for c.oldest != nil && !now.Before(c.oldest.expires) {
		c.removeLocked(c.oldest)
	}
}

// removeLocked unlinks e from both lists and the index. It requires c.mu
// held.
func (c *Cache[K, V]) removeLocked(e *cacheEntry[K, V]) {
	c.unlinkUsageLocked(e)
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.oldest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.newest = e.prev
	}
	e.prev, e.next = nil, nil
	delete(c.entries, e.key)
}

// touchLocked moves e to the front of the usage list. It requires c.mu held.
func (c *Cache[K, V]) touchLocked(e *cacheEntry[K, V]) {
	if c.mru == e {
		return
	}
	c.unlinkUsageLocked(e)
	c.pushFrontLocked(e)
}

func (c *Cache[K, V]) pushFrontLocked(e *cacheEntry[K, V]) {
	e.newer, e.older = nil, c.mru
	if c.mru != nil {
		c.mru.newer = e
	} else {
		c.lru = e
	}
	c.mru = e
}

func (c *Cache[K, V]) unlinkUsageLocked(e *cacheEntry[K, V]) {
	if e.newer != nil {
		e.newer.older = e.older
	} else if c.mru == e {
		c.mru = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else if c.lru == e {
		c.lru = e.newer
	}
	e.newer, e.older = nil, nil
}
