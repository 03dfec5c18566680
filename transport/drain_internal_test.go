package transport

import (
	"testing"
	"time"
)

// TestUploadMeterDrain pins the drain estimate row by row: each row is an
// upload's reads (when each started, and how many bytes it got) and the
// time its write ended. MiB figures keep the arithmetic readable: at 1 MiB
// a second, a MiB queued is a second of drain.
func TestUploadMeterDrain(t *testing.T) {
	const mib = 1 << 20
	type read struct {
		at time.Duration // since the first read
		n  int
	}
	// burst returns k reads of 1 MiB at 0: the buffers taking them at once.
	burst := func(k int) []read {
		rs := make([]read, k)
		for i := range rs {
			rs[i] = read{0, mib}
		}
		return rs
	}
	// paced returns reads of 1 MiB each, starting at from and every
	// interval after, then the read at EOF.
	paced := func(from, interval time.Duration, k int) []read {
		rs := make([]read, 0, k+1)
		for i := range k + 1 {
			n := mib
			if i == k {
				n = 0
			}
			rs = append(rs, read{from + time.Duration(i)*interval, n})
		}
		return rs
	}
	cat := func(parts ...[]read) []read {
		var rs []read
		for _, p := range parts {
			rs = append(rs, p...)
		}
		return rs
	}
	// staircase is Linux's shape over a 1 MiB/s link: a burst of 4 MiB
	// that fills the buffers, then a step every second: the socket wakes
	// the writer when a MiB has drained and takes a MiB at once (two
	// reads, microseconds apart). The last step takes last bytes, and the
	// EOF read follows it.
	staircase := func(steps, last int) []read {
		rs := burst(4)
		for s := 1; s <= steps; s++ {
			at, n := time.Duration(s)*time.Second, mib/2
			if s == steps {
				n = last / 2
			}
			rs = append(rs, read{at, n}, read{at + time.Microsecond, n})
		}
		return append(rs, read{time.Duration(steps)*time.Second + 2*time.Microsecond, 0})
	}
	tests := []struct {
		name  string
		reads []read
		wrote time.Duration // since the first read
		want  time.Duration
	}{
		{"no body read", nil, time.Second, 0},
		{"one read", []read{{0, mib}}, time.Second, 0},
		{"taken at once: a small body, or loopback", cat(burst(8), []read{{0, 0}}), 0, 0},
		{"taken at once, written later", cat(burst(8), []read{{0, 0}}), time.Second, 0},
		// A slow source (the link is faster): the reads keep its pace from
		// the start, nothing is queued.
		{"paced from the start", paced(0, 150*time.Millisecond, 8), 1200 * time.Millisecond, 0},
		// 4 MiB at once, then the link's 1 MiB/s: the reads wait for it
		// from 1 s on, and the write ends at 5 s, when 8 MiB have been
		// sent and 5 carried: 3 s to drain.
		{"burst then the link's pace", cat(burst(4), paced(time.Second, time.Second, 4)), 5 * time.Second, 3 * time.Second},
		// Eight steps, 12 MiB: the marks are step starts (at 4 s and 8 s,
		// 7 and 11 MiB read before them): 1 MiB/s, the link's rate. The
		// link has carried 8 MiB of the 12: 4 s to drain.
		{"staircase, 8 steps", staircase(8, mib), 8 * time.Second, 4 * time.Second},
		// Twelve steps: no read at or after 16 s, so the marks stay at 4 s
		// and 8 s; 16 MiB sent, 12 carried.
		{"staircase, 12 steps", staircase(12, mib), 12 * time.Second, 4 * time.Second},
		// The body ends half way through the last step: 15.5 MiB sent, 12
		// carried, 3.5 s to drain. Measured from the older mark to the
		// write instead, the rate would count the last step's bytes as
		// carried (8.5 MiB in 8 s) and the drain would be 2.6 s.
		{"staircase, the body ends within a step", staircase(12, mib/2), 12 * time.Second, 3500 * time.Millisecond},
		// A burst of 6 MiB, then 1 MiB/s: 8 MiB take 8 s, the upload took
		// 3 s: 5 s of drain, capped at the upload's 3 s.
		{"capped at the upload's time", cat(burst(6), paced(time.Second, time.Second, 2)), 3 * time.Second, 3 * time.Second},
		// Reads that got nothing between the marks: no rate.
		{"no bytes between the marks", []read{{0, mib}, {time.Second, 0}, {2 * time.Second, 0}}, 2 * time.Second, 0},
	}
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m uploadMeter
			for _, r := range tc.reads {
				m.read(start.Add(r.at), r.n)
			}
			if got := m.drain(start.Add(tc.wrote)); got != tc.want {
				t.Errorf("drain %v, want %v", got, tc.want)
			}
		})
	}
}
