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
	// the writer when a MiB has drained and takes a MiB at once, in two
	// reads pause apart (microseconds, or a scheduler's pause). The last
	// step takes last bytes, and the EOF read follows it.
	staircase := func(steps, last int, pause time.Duration) []read {
		rs := burst(4)
		for s := 1; s <= steps; s++ {
			at, n := time.Duration(s)*time.Second, mib/2
			if s == steps {
				n = last / 2
			}
			rs = append(rs, read{at, n}, read{at + pause, n})
		}
		return append(rs, read{time.Duration(steps)*time.Second + pause + time.Microsecond, 0})
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
		// Eight steps, 12 MiB: the rate is measured from the first step's
		// start to the last's (1 s and 8 s, 4 and 11 MiB read before them):
		// 1 MiB/s, the link's. The link has carried 8 MiB of the 12: 4 s to
		// drain.
		{"staircase", staircase(8, mib, time.Microsecond), 8 * time.Second, 4 * time.Second},
		// A step's reads 50 ms apart, not microseconds: the pause is not a
		// wait for the link, and nothing changes.
		{"staircase, a pause within each step", staircase(8, mib, 50*time.Millisecond), 8*time.Second + 50*time.Millisecond, 4*time.Second - 50*time.Millisecond},
		// The body ends half way through the last of 12 steps: 15.5 MiB
		// sent, 12 carried: 3.5 s to drain. Measured up to the write
		// instead, the rate would count the last step's bytes as carried
		// (11.5 MiB in 11 s) and the drain would be 2.8 s.
		{"staircase, the body ends within a step", staircase(12, mib/2, time.Microsecond), 12 * time.Second, 3500 * time.Millisecond},
		// A burst of 6 MiB, then 1 MiB/s: 8 MiB take 8 s, the upload took
		// 3 s: 5 s of drain, capped at the upload's 3 s.
		{"capped at the upload's time", cat(burst(6), paced(time.Second, time.Second, 2)), 3 * time.Second, 3 * time.Second},
		// A wait three times as long as any before (a stall) restarts the
		// count, and the steps after it, a third as long, are not waits:
		// no rate, no extension.
		{"a stall restarts the count", cat(burst(4), []read{{time.Second, mib}, {2 * time.Second, mib}, {5 * time.Second, mib},
			{6 * time.Second, mib}, {7 * time.Second, mib}, {8 * time.Second, 0}}), 8 * time.Second, 0},
		// Reads that got nothing between two waits: no rate.
		{"no bytes between the waits", []read{{0, mib}, {time.Second, 0}, {2 * time.Second, 0}}, 2 * time.Second, 0},
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
