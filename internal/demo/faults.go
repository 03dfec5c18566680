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
	if host != o.Host || o.For <= 0 || elapsed < o.Start {
		return false
	}
	in := elapsed - o.Start
	if o.Every > 0 {
		in %= o.Every
	}
	return in < o.For
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
	numFaults
)

// String names the fault as the view shows it.
func (f fault) String() string {
	return [...]string{"ok", "slow", "hang", "503", "429", "reset", "outage"}[f]
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
