package resilience

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// BenchmarkLimitFigures reports the simulation's figures that
// BENCHMARKS.md §9 quotes, as medians over seeds (the model is
// deterministic per seed, so one iteration is enough):
//
//	go test -run '^$' -bench LimitFigures -benchtime 1x ./resilience/
//
// fleet/N: goodput during the drop as a share of capacity, fairness (the
// least-served client's goodput ÷ the best-served one's), over 15 seeds;
// "-waiting" with clients that wait for a permit as the transport's do
// (overloadModel.wait), the others shedding at once.
// fastfail: 503s per run with the limit and 2 retries, and without either,
// over 5 seeds. slowhost (2 workers × 200ms, 7/s, 1 s timeout, 2
// retries): the most arrivals at the server in one second from the drop
// on ÷ the requests offered in that second, over 15 seeds. steady/…: shed, as
// a share of requests offered, in 20 s without a drop, over 5 seeds, by
// clients that shed at once and by clients that wait (shed%-waiting, the
// transport's count).
func BenchmarkLimitFigures(b *testing.B) {
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, n := range []int{5, 20, 50} {
		b.Run(fmt.Sprintf("fleet/%d", n), func(b *testing.B) {
			for range b.N {
				var good, fair, goodW, fairW []float64
				for s := range uint64(15) {
					m := fleetDrop(n, (s+1)*7+uint64(n))
					r := m.run()
					g, f := dropFigures(m, r)
					good, fair = append(good, g), append(fair, f)
					m.wait = true
					g, f = dropFigures(m, m.run())
					goodW, fairW = append(goodW, g), append(fairW, f)
				}
				b.ReportMetric(100*median(good), "goodput%")
				b.ReportMetric(median(fair), "fairness")
				b.ReportMetric(100*median(goodW), "goodput%-waiting")
				b.ReportMetric(median(fairW), "fairness-waiting")
			}
		})
	}
	b.Run("fastfail", func(b *testing.B) {
		for range b.N {
			var limited, plain float64
			for s := range uint64(5) {
				m := fleetDrop(20, s+1)
				m.queue, m.retries = 16, 2
				r := m.run()
				limited += float64(total(r.rejected, 0, len(r.rejected))) / 5
				m.noLimit, m.retries = true, 0
				r = m.run()
				plain += float64(total(r.rejected, 0, len(r.rejected))) / 5
			}
			b.ReportMetric(limited, "503s-limit+retries")
			b.ReportMetric(plain, "503s-plain")
		}
	})
	b.Run("slowhost", func(b *testing.B) {
		for range b.N {
			var peaks []float64
			for s := range uint64(15) {
				m := overloadModel{workers: 2, service: 200 * time.Millisecond, load: 0.7, deadline: time.Second,
					dropAt: 3 * time.Second, dropFor: 4 * time.Second, dropBy: 2, length: 14 * time.Second, seed: s + 1, retries: 2}
				r := m.run()
				// Over whole seconds: the most arrivals at the server
				// ÷ requests offered in the same second, as the bench's
				// column (1 without retries).
				peak := 0.0
				for i := int(m.dropAt / time.Second); i < len(r.arrivals)-1; i++ {
					peak = max(peak, float64(r.arrivals[i])/float64(max(r.offered[i], 1)))
				}
				peaks = append(peaks, peak)
			}
			b.ReportMetric(median(peaks), "peak-arrivals/offered")
		}
	})
	for _, c := range []struct {
		name    string
		clients int
		f       func(*overloadModel)
	}{
		{"1/lognormal70", 1, func(m *overloadModel) { m.sigma, m.load = 1, 0.7 }},
		{"1/lognormal85", 1, func(m *overloadModel) { m.sigma, m.load = 1, 0.85 }},
		{"1/pareto70", 1, func(m *overloadModel) { m.pareto, m.load = 1.5, 0.7 }},
		{"1/pareto85", 1, func(m *overloadModel) { m.pareto, m.load = 1.5, 0.85 }},
		{"1/bursts70", 1, func(m *overloadModel) { m.burst, m.load = 3, 0.7 }},
		{"1/bursts90", 1, func(m *overloadModel) { m.burst, m.load = 3, 0.9 }},
		{"20/lognormal70", 20, func(m *overloadModel) { m.sigma, m.load = 1, 0.7 }},
		{"20/lognormal85", 20, func(m *overloadModel) { m.sigma, m.load = 1, 0.85 }},
		{"20/pareto70", 20, func(m *overloadModel) { m.pareto, m.load = 1.5, 0.7 }},
		{"20/pareto85", 20, func(m *overloadModel) { m.pareto, m.load = 1.5, 0.85 }},
		{"20/bursts70", 20, func(m *overloadModel) { m.burst, m.load = 3, 0.7 }},
		{"20/bursts90", 20, func(m *overloadModel) { m.burst, m.load = 3, 0.9 }},
	} {
		b.Run("steady/"+c.name, func(b *testing.B) {
			for range b.N {
				var shed, waited []float64
				for s := range uint64(5) {
					m := with(fleetDrop(c.clients, s+1), c.f)
					m.dropBy, m.length = 1, 20*time.Second
					r := m.run()
					shed = append(shed, 100*float64(total(r.shed, 0, len(r.shed)))/float64(total(r.offered, 0, len(r.offered))))
					m.wait = true
					r = m.run()
					waited = append(waited, 100*float64(total(r.shed, 0, len(r.shed)))/float64(total(r.offered, 0, len(r.offered))))
				}
				b.ReportMetric(median(shed), "shed%")
				b.ReportMetric(median(waited), "shed%-waiting")
			}
		})
	}
}

// dropFigures returns run r of m's goodput during the drop as a share of
// what the server could serve then, and its fairness: the least-served
// client's goodput then ÷ the best-served one's.
func dropFigures(m overloadModel, r overloadResult) (good, fairness float64) {
	from, to := int(m.dropAt/time.Second), int((m.dropAt+m.dropFor)/time.Second)
	dropCap := float64(m.workers) / (m.service.Seconds() * m.dropBy) * float64(to-from)
	least, most := math.MaxInt, 0
	for _, g := range r.goodBy {
		x := total(g, from, to)
		least, most = min(least, x), max(most, x)
	}
	return float64(total(r.good, from, to)) / dropCap, float64(least) / float64(max(most, 1))
}
