package demo

import (
	"fmt"
	"math"
	"time"
)

// Faults is the failure mix of every virtual host, as shares of requests in
// [0, 1]. The shares are tried in the order of the fields; whatever is left
// is answered 200 after the base latency.
type Faults struct {
	// Reset closes the connection with a TCP RST after reading the request.
	// net/http resends a GET on a reused connection by itself, so resets
	// mostly reach gotry on PUTs (payments).
	Reset float64
	// TooMany answers 429 with "Retry-After: 1".
	TooMany float64
	// Unavailable answers 503 without Retry-After.
	Unavailable float64
	// Hang waits HangFor before answering, past the per-attempt timeout.
	Hang    float64
	HangFor time.Duration
	// Slow answers 200 after SlowMin to 2×SlowMin: the tail hedging cuts.
	Slow    float64
	SlowMin time.Duration
	// Latency is the median latency of a normal answer; it is drawn from an
	// exponential distribution shifted by Latency/2.
	Latency time.Duration
}

// DefaultFaults is the mix the demo starts with.
func DefaultFaults() Faults {
	return Faults{
		Reset:       0.01,
		TooMany:     0.02,
		Unavailable: 0.05,
		Hang:        0.005,
		HangFor:     3 * time.Second,
		Slow:        0.05,
		SlowMin:     300 * time.Millisecond,
		Latency:     10 * time.Millisecond,
	}
}

func (f Faults) validate() error {
	shares := []struct {
		name string
		v    float64
	}{{"reset", f.Reset}, {"429", f.TooMany}, {"503", f.Unavailable}, {"hang", f.Hang}, {"slow", f.Slow}}
	sum := 0.0
	for _, s := range shares {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			return fmt.Errorf("demo: fault share %s must be in [0, 1], got %v", s.name, s.v)
		}
		sum += s.v
	}
	if sum > 1 {
		return fmt.Errorf("demo: fault shares add up to %.3f, more than 1", sum)
	}
	if f.HangFor < 0 || f.SlowMin < 0 || f.Latency < 0 {
		return fmt.Errorf("demo: fault durations must not be negative")
	}
	return nil
}

// Outage makes one host answer 503 to everything for For, every Every,
// starting Start after the upstream starts: windows [Start+k·Every,
// Start+k·Every+For). Every 0 means a single outage; For 0 or Host "" means
// none.
type Outage struct {
	Host  string
	Start time.Duration
	Every time.Duration
	For   time.Duration
}

// DefaultOutage takes payments down for 10s every 40s, first 15s in.
func DefaultOutage() Outage {
	return Outage{Host: "payments", Start: 15 * time.Second, Every: 40 * time.Second, For: 10 * time.Second}
}

func (o Outage) validate() error {
	if o.Start < 0 || o.Every < 0 || o.For < 0 {
		return fmt.Errorf("demo: outage durations must not be negative")
	}
	if o.Every > 0 && o.For > o.Every {
		return fmt.Errorf("demo: outage length %v is longer than its period %v", o.For, o.Every)
	}
	return nil
}

// Active reports whether host is down at elapsed since the upstream started.
func (o Outage) Active(host string, elapsed time.Duration) bool {
	return host == o.Host && inWindow(elapsed, o.Start, o.Every, o.For)
}

// inWindow reports whether elapsed falls in one of the windows
// [start+k·every, start+k·every+length); every 0 means the first window only.
func inWindow(elapsed, start, every, length time.Duration) bool {
	if length <= 0 || elapsed < start {
		return false
	}
	in := elapsed - start
	if every > 0 {
		in %= every
	}
	return in < length
}

// Burst is a brownout of every host: for For, every Every, starting Start
// after the upstream starts, each host answers 503 to a Share of requests on
// top of its usual faults. Failures that frequent want more retries than the
// retry budget holds, so the budget refuses some (gotry_budget_refusals_total,
// GotryRetryBudgetExhausted), while few enough of them come in a row that the
// breakers mostly stay closed. Share 0 or For 0 means none.
type Burst struct {
	Share float64
	Start time.Duration
	Every time.Duration
	For   time.Duration
}

// DefaultBurst fails 30% of every host's requests for 10s every 60s, first
// 35s in: once in the demo's default 60s run, between two payments outages.
// At the default 50 requests/s that asks for about 20 retries/s, which
// succeed 70% of the time. The library's default budget would pay them all
// (a retry that succeeds gives its token back); the demo's tighter ratio
// (0.1) pays the failed ones only up to a tenth of the successes, so some
// requests give up with budget_exhausted and the budget's panels have data.
func DefaultBurst() Burst {
	return Burst{Share: 0.3, Start: 35 * time.Second, Every: 60 * time.Second, For: 10 * time.Second}
}

func (b Burst) validate() error {
	if math.IsNaN(b.Share) || b.Share < 0 || b.Share > 1 {
		return fmt.Errorf("demo: burst share must be in [0, 1], got %v", b.Share)
	}
	if b.Start < 0 || b.Every < 0 || b.For < 0 {
		return fmt.Errorf("demo: burst durations must not be negative")
	}
	if b.Every > 0 && b.For > b.Every {
		return fmt.Errorf("demo: burst length %v is longer than its period %v", b.For, b.Every)
	}
	return nil
}

// Active reports whether the burst is on at elapsed since the upstream
// started.
func (b Burst) Active(elapsed time.Duration) bool {
	return b.Share > 0 && inWindow(elapsed, b.Start, b.Every, b.For)
}

// Drop is a capacity drop of one host, the overload the transport's
// concurrency limit absorbs: for For, every Every, starting Start after the
// upstream starts, Host serves at most Capacity requests at once, each
// taking Service (its usual latency replaced), and queues the rest first in,
// first out, up to Queue of them (further ones are answered 503 at once, as
// a full accept queue would). A request whose client has gone away (a
// per-attempt timeout, a lost hedge) still costs its service time when it
// reaches the head of the queue, as on a real server; the queued requests
// are served after the window ends too. Its errors (503, 429, resets) are
// answered at once, as always. Host "" or For 0 means none.
type Drop struct {
	Host     string
	Start    time.Duration
	Every    time.Duration
	For      time.Duration
	Capacity int
	Service  time.Duration
	Queue    int
}

// DefaultDrop makes search serve one request at a time at 100ms each
// (10/s, about 60% of the 17/s the default load sends it) for 10s every 60s,
// first 5s in: before the first payments outage, so the limit has learned
// search's normal latency and the drop shows on its own.
func DefaultDrop() Drop {
	return Drop{Host: "search", Start: 5 * time.Second, Every: 60 * time.Second, For: 10 * time.Second,
		Capacity: 1, Service: 100 * time.Millisecond, Queue: 64}
}

func (d Drop) validate() error {
	if d.Start < 0 || d.Every < 0 || d.For < 0 || d.Service < 0 || d.Capacity < 0 || d.Queue < 0 {
		return fmt.Errorf("demo: capacity drop settings must not be negative")
	}
	if d.Every > 0 && d.For > d.Every {
		return fmt.Errorf("demo: capacity drop length %v is longer than its period %v", d.For, d.Every)
	}
	if d.Host != "" && d.For > 0 && d.Capacity < 1 {
		return fmt.Errorf("demo: capacity drop needs a capacity of at least 1, got %d", d.Capacity)
	}
	return nil
}

// Active reports whether host's capacity is down at elapsed since the
// upstream started.
func (d Drop) Active(host string, elapsed time.Duration) bool {
	return host == d.Host && d.Capacity > 0 && inWindow(elapsed, d.Start, d.Every, d.For)
}

// fault is what the upstream does with one request.
type fault int

const (
	faultNone fault = iota
	faultSlow
	faultHang
	fault503
	fault429
	faultReset
	faultOutage
	faultBurst
	faultCapped    // served under a capacity drop, after its queue
	faultQueueFull // refused: the capacity drop's queue was full
	numFaults
)

// String names the fault as the view shows it.
func (f fault) String() string {
	return [...]string{"ok", "slow", "hang", "503", "429", "reset", "outage", "burst", "capped", "queue-full"}[f]
}

// pick chooses a fault for a request with u uniform in [0, 1).
func (f Faults) pick(u float64) fault {
	for _, c := range [...]struct {
		share float64
		f     fault
	}{{f.Reset, faultReset}, {f.TooMany, fault429}, {f.Unavailable, fault503}, {f.Hang, faultHang}, {f.Slow, faultSlow}} {
		if u < c.share {
			return c.f
		}
		u -= c.share
	}
	return faultNone
}

// latency is how long a request with fault k waits before answering, with
// u uniform in [0, 1).
func (f Faults) latency(k fault, u float64) time.Duration {
	switch k {
	case faultHang:
		return f.HangFor
	case faultSlow:
		return f.SlowMin + time.Duration(u*float64(f.SlowMin))
	case faultNone:
		// Exponential with median Latency/2, shifted by Latency/2: the
		// median is Latency, p99 about 4×Latency.
		half := float64(f.Latency) / 2
		return time.Duration(half - half/math.Ln2*math.Log(1-u))
	}
	return 0 // errors answer at once
}
