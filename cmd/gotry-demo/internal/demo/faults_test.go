package demo

import (
	"testing"
	"time"
)

func TestOutageActive(t *testing.T) {
	o := Outage{Host: "payments", Start: 15 * time.Second, Every: 40 * time.Second, For: 10 * time.Second}
	tests := []struct {
		name    string
		o       Outage
		host    string
		elapsed time.Duration
		want    bool
	}{
		{"before the first", o, "payments", 14 * time.Second, false},
		{"first starts", o, "payments", 15 * time.Second, true},
		{"first ends", o, "payments", 25 * time.Second, false},
		{"between", o, "payments", 40 * time.Second, false},
		{"second", o, "payments", 55*time.Second + time.Millisecond, true},
		{"other host", o, "search", 20 * time.Second, false},
		{"once: inside", Outage{Host: "a", Start: time.Second, For: time.Second}, "a", 1500 * time.Millisecond, true},
		{"once: never again", Outage{Host: "a", Start: time.Second, For: time.Second}, "a", 41 * time.Second, false},
		{"none", Outage{Host: "a", Start: 0, Every: time.Second}, "a", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.Active(tt.host, tt.elapsed); got != tt.want {
				t.Fatalf("Active(%q, %v) = %v, want %v", tt.host, tt.elapsed, got, tt.want)
			}
		})
	}
}

func TestFaultsPick(t *testing.T) {
	f := Faults{Reset: 0.1, TooMany: 0.1, Unavailable: 0.1, Hang: 0.1, Slow: 0.1}
	tests := []struct {
		u    float64
		want fault
	}{
		{0, faultReset}, {0.15, fault429}, {0.25, fault503}, {0.35, faultHang}, {0.45, faultSlow}, {0.5, faultNone}, {0.99, faultNone},
	}
	for _, tt := range tests {
		t.Run(tt.want.String(), func(t *testing.T) {
			if got := f.pick(tt.u); got != tt.want {
				t.Fatalf("pick(%v) = %v, want %v", tt.u, got, tt.want)
			}
		})
	}
}

// The shares are what the dice produce over many draws.
func TestFaultsPickShares(t *testing.T) {
	f := DefaultFaults()
	const n = 100000
	var got [numFaults]int
	for i := range n {
		got[f.pick((float64(i)+0.5)/n)]++
	}
	for _, c := range []struct {
		f     fault
		share float64
	}{{faultReset, f.Reset}, {fault429, f.TooMany}, {fault503, f.Unavailable}, {faultHang, f.Hang}, {faultSlow, f.Slow}} {
		if d := float64(got[c.f])/n - c.share; d > 0.001 || d < -0.001 {
			t.Errorf("%v: share %.4f, want %.4f", c.f, float64(got[c.f])/n, c.share)
		}
	}
}

func TestFaultsLatency(t *testing.T) {
	f := DefaultFaults()
	if got := f.latency(faultNone, 0.5); got < f.Latency*9/10 || got > f.Latency*11/10 {
		t.Errorf("median latency %v, want about %v", got, f.Latency)
	}
	if got := f.latency(faultSlow, 0); got != f.SlowMin {
		t.Errorf("slow latency at u=0: %v, want %v", got, f.SlowMin)
	}
	if got := f.latency(faultSlow, 0.999); got >= 2*f.SlowMin {
		t.Errorf("slow latency at u=0.999: %v, want below %v", got, 2*f.SlowMin)
	}
	if got := f.latency(fault503, 0.7); got != 0 {
		t.Errorf("a 503 waits %v, want 0", got)
	}
}

func TestFaultsValidate(t *testing.T) {
	tests := []struct {
		name string
		f    Faults
	}{
		{"negative share", Faults{Reset: -0.1}},
		{"share above 1", Faults{Slow: 1.5}},
		{"sum above 1", Faults{Slow: 0.6, Unavailable: 0.6}},
		{"negative duration", Faults{SlowMin: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f.validate(); err == nil {
				t.Fatalf("validate(%+v) = nil, want an error", tt.f)
			}
		})
	}
	if err := DefaultFaults().validate(); err != nil {
		t.Fatalf("DefaultFaults invalid: %v", err)
	}
}

func TestBurstActive(t *testing.T) {
	b := Burst{Share: 0.3, Start: 35 * time.Second, Every: 60 * time.Second, For: 10 * time.Second}
	tests := []struct {
		name    string
		b       Burst
		elapsed time.Duration
		want    bool
	}{
		{"before the first", b, 34 * time.Second, false},
		{"first starts", b, 35 * time.Second, true},
		{"first ends", b, 45 * time.Second, false},
		{"second", b, 95*time.Second + time.Millisecond, true},
		{"once: never again", Burst{Share: 1, Start: time.Second, For: time.Second}, 61 * time.Second, false},
		{"share 0 is none", Burst{Start: 0, For: time.Hour}, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Active(tt.elapsed); got != tt.want {
				t.Fatalf("Active(%v) = %v, want %v", tt.elapsed, got, tt.want)
			}
		})
	}
}

// The default run (60s) has one burst, and it ends before the run does.
func TestDefaultBurstFallsInTheDefaultRun(t *testing.T) {
	b, d := DefaultBurst(), DefaultConfig().Duration
	if !b.Active(b.Start) || b.Start+b.For > d-5*time.Second {
		t.Fatalf("DefaultBurst %+v does not fit in the default %v run with 5s to spare", b, d)
	}
	if err := b.validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDropActive(t *testing.T) {
	d := Drop{Host: "search", Start: 5 * time.Second, Every: 60 * time.Second, For: 10 * time.Second, Capacity: 1, Service: 100 * time.Millisecond}
	tests := []struct {
		name    string
		d       Drop
		host    string
		elapsed time.Duration
		want    bool
	}{
		{"before the first", d, "search", 4 * time.Second, false},
		{"first starts", d, "search", 5 * time.Second, true},
		{"another host", d, "payments", 6 * time.Second, false},
		{"first ends", d, "search", 15 * time.Second, false},
		{"second", d, "search", 65*time.Second + time.Millisecond, true},
		{"capacity 0 is none", Drop{Host: "search", For: time.Hour}, "search", time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Active(tt.host, tt.elapsed); got != tt.want {
				t.Fatalf("Active(%q, %v) = %v, want %v", tt.host, tt.elapsed, got, tt.want)
			}
		})
	}
}

func TestDropValidate(t *testing.T) {
	tests := []struct {
		name string
		d    Drop
	}{
		{"negative service", Drop{Host: "search", For: time.Second, Capacity: 1, Service: -time.Millisecond}},
		{"longer than its period", Drop{Host: "search", Every: time.Second, For: 2 * time.Second, Capacity: 1}},
		{"no capacity", Drop{Host: "search", For: time.Second}},
		{"negative queue", Drop{Host: "search", For: time.Second, Capacity: 1, Queue: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.d.validate(); err == nil {
				t.Fatalf("validate(%+v) = nil, want an error", tt.d)
			}
		})
	}
	if err := (Drop{}).validate(); err != nil {
		t.Fatalf("no drop: %v", err)
	}
}

// The default run (60s) has one capacity drop on a host under the limit,
// ended with time to recover before the run does.
func TestDefaultDropFallsInTheDefaultRun(t *testing.T) {
	d, cfg := DefaultDrop(), DefaultConfig()
	if !d.Active(d.Host, d.Start) || d.Start+d.For > cfg.Duration-10*time.Second {
		t.Fatalf("DefaultDrop %+v does not fit in the default %v run with 10s to spare", d, cfg.Duration)
	}
	if len(cfg.LimitHosts) != 1 || cfg.LimitHosts[0] != d.Host {
		t.Fatalf("limit hosts %q, want the drop's host %q", cfg.LimitHosts, d.Host)
	}
	if err := d.validate(); err != nil {
		t.Fatal(err)
	}
}
