package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The random-latency scenarios: every server arrival draws its own latency
// from a seeded generator, independently of every other arrival, so a hedge
// draws independently of its original (unlike the evenly spaced stalls of
// the hedging scenario, which a hedge always escapes).
//
//   - randstall: ~1ms per request, each request 5% likely to take 20–200ms
//     more;
//   - randshift: the same, then, from the middle request on, a base of
//     15–22ms instead of 1ms;
//   - lognormal: a heavy tail with no distinct slow band (median 1ms,
//     σ 1.25: p95 7.8ms, p99 18ms).
//
// Each round builds every candidate afresh (cold, as a new client is) and
// runs them one after the other, in an order that rotates per round; within
// a round every candidate sees the same draws, arrival by arrival.

const (
	stallShare           = 0.05
	stallMin, stallMax   = 20 * time.Millisecond, 200 * time.Millisecond
	lognormalMedian      = time.Millisecond
	lognormalSigma       = 1.25
	shiftMin, shiftMax   = 15 * time.Millisecond, 22 * time.Millisecond
	randomSeed           = 0x5eed2024
	failsafeQuantileAge  = 1000 // executions failsafe-go's moving quantile remembers
	failsafeMinRecorded  = 50   // executions before failsafe-go's quantile hedging starts, as AdaptiveMinSamples
	randomSampleInterval = 50 * time.Millisecond
)

// latencyModel draws each server arrival's latency. Arrival n of a round
// draws from its own stream (seed, n), so the draws do not depend on how
// arrivals interleave, and a hedge's draw is independent of its original's.
type latencyModel struct {
	seed    uint64
	latency func(s *stream) time.Duration
}

func (m *latencyModel) draw(n int64) time.Duration {
	s := stream{state: m.seed ^ uint64(n)*0x9e3779b97f4a7c15}
	return m.latency(&s)
}

// stream is a splitmix64 generator: small, seeded, good enough for latencies.
type stream struct{ state uint64 }

// float returns a uniform value in [0, 1).
func (s *stream) float() float64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) * 0x1p-53
}

// between returns a uniform duration in [lo, hi).
func (s *stream) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.float()*float64(hi-lo))
}

// stalls adds, with probability stallShare, a stall of 20–200ms to base.
func stalls(s *stream, base time.Duration) time.Duration {
	if s.float() < stallShare {
		return base + s.between(stallMin, stallMax)
	}
	return base
}

// lognormal draws a lognormal latency (Box–Muller), capped at 2s.
func lognormal(s *stream) time.Duration {
	u1, u2 := 1-s.float(), s.float()
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	return min(time.Duration(float64(lognormalMedian)*math.Exp(lognormalSigma*z)), 2*time.Second)
}

// RandomRow is one candidate of a random-latency scenario, pooled over the
// rounds.
type RandomRow struct {
	Name           string
	P50, P99, P999 time.Duration
	P99Lo, P99Hi   time.Duration // p99's range over the rounds
	Client, Server int64
	ExtraLoad      float64 // server requests ÷ client requests − 1
	// After the shift (randshift only): the p99 of the second half's
	// requests and the extra load while they ran.
	P99After       time.Duration
	ExtraLoadAfter float64
	// Hedges is how many hedges launched (counted by the hedger's hook);
	// Delays the adaptive candidate's learned delay, sampled every 50ms
	// once warm (pooled over the rounds).
	Hedges int64
	Delays []time.Duration
	Errors int64
}

// RandomResult is one random-latency table.
type RandomResult struct {
	Scenario          string
	Requests, Workers int
	Rounds            int
	Rows              []RandomRow
}

// randomCand is one candidate: a round trip over base, with a counter its
// hedger's hook adds each hedge to.
type randomCand struct {
	name     string
	adaptive bool
	build    func(base http.RoundTripper, hedges *atomic.Int64) http.RoundTripper
}

func gotryFixed(d time.Duration) randomCand {
	return randomCand{name: fmt.Sprintf("gotry WithHedging(%v, 1)", d), build: func(b http.RoundTripper, n *atomic.Int64) http.RoundTripper {
		return transport.New(b, transport.WithHedging(d, 1), countHedges(n))
	}}
}

func gotryAdaptive(load float64) randomCand {
	return randomCand{name: fmt.Sprintf("gotry WithAdaptiveHedging(%g%%, 1)", 100*load), adaptive: true,
		build: func(b http.RoundTripper, n *atomic.Int64) http.RoundTripper {
			return transport.New(b, transport.WithAdaptiveHedging(resilience.AdaptiveHedging{MaxExtraLoad: load}, 1), countHedges(n))
		}}
}

func countHedges(n *atomic.Int64) transport.Option {
	return transport.WithHooks(transport.Hooks{OnHedge: func(resilience.HedgeEvent) { n.Add(1) }})
}

// failsafeHedge is failsafe-go's hedge policy alone (at most one hedge).
func failsafeHedge(name string, b hedgepolicy.Builder[*http.Response]) randomCand {
	return randomCand{name: name, build: func(base http.RoundTripper, n *atomic.Int64) http.RoundTripper {
		p := b.WithMaxHedges(1).OnHedge(func(failsafe.ExecutionEvent[*http.Response]) { n.Add(1) }).Build() //nolint:bodyclose // no response is obtained here
		return failsafehttp.NewRoundTripper(base, p)
	}}
}

func randomCandidates() []randomCand {
	return []randomCand{
		{name: "no hedging (bare)", build: func(b http.RoundTripper, _ *atomic.Int64) http.RoundTripper { return b }},
		gotryFixed(2 * time.Millisecond), gotryFixed(5 * time.Millisecond),
		gotryFixed(10 * time.Millisecond), gotryFixed(20 * time.Millisecond),
		gotryAdaptive(0.05), gotryAdaptive(0.10),
		failsafeHedge("failsafe-go learned p95 quantile", hedgepolicy.NewBuilderWithDelayQuantile[*http.Response](0.95, failsafeQuantileAge, failsafeMinRecorded)), //nolint:bodyclose // a builder, no response
		failsafeHedge("failsafe-go fixed 10ms", hedgepolicy.NewBuilderWithDelay[*http.Response](10*time.Millisecond)),                                              //nolint:bodyclose // a builder, no response
	}
}

// runRandom runs one random-latency scenario: "randstall", "randshift" or
// "lognormal".
func runRandom(cfg *Config, scenario string) (*RandomResult, error) {
	res := &RandomResult{Scenario: scenario, Requests: cfg.randomRequests, Workers: 4, Rounds: cfg.Rounds}
	var shifted atomic.Bool
	model := func(s *stream) time.Duration { return stalls(s, time.Millisecond) }
	switch scenario {
	case "randshift":
		model = func(s *stream) time.Duration {
			if shifted.Load() {
				return stalls(s, s.between(shiftMin, shiftMax))
			}
			return stalls(s, time.Millisecond)
		}
	case "lognormal":
		model = lognormal
	}
	cands := randomCandidates()
	if scenario == "lognormal" {
		// The fixed delay at the distribution's exact p95: what a delay tuned
		// by hand to 5% extra load would be.
		cands = append(cands, gotryFixed(time.Duration(float64(lognormalMedian)*math.Exp(lognormalSigma*1.6449)).Round(100*time.Microsecond)))
	}
	be := newBackend()
	defer be.Close()
	url := be.URL() + "/item"
	type acc struct {
		lat, after   []time.Duration
		p99s         []time.Duration
		client, srv  int64
		srvAfter     int64
		clientAfter  int64
		hedges, errs int64
		delays       []time.Duration
	}
	accs := make([]acc, len(cands))
	for r := range res.Rounds {
		for j := range cands {
			ci := (j + r) % len(cands)
			c := cands[ci]
			cfg.progress("%s: round %d/%d, %s", scenario, r+1, res.Rounds, c.name)
			be.reset()
			shifted.Store(false)
			be.model.Store(&latencyModel{seed: randomSeed + uint64(r), latency: model})
			base := newLoopbackBase()
			var hedges atomic.Int64
			rt := c.build(base, &hedges)
			var shiftAt atomic.Int64 // the server's count when the shift came
			var onStart func(i int)
			if scenario == "randshift" {
				onStart = func(i int) {
					if i == res.Requests/2 {
						shiftAt.Store(be.requests.Load())
						shifted.Store(true)
					}
				}
			}
			var delays []time.Duration
			stop := make(chan struct{})
			var sampler sync.WaitGroup
			if tr, ok := rt.(*transport.Transport); ok && c.adaptive {
				sampler.Add(1)
				go func() {
					defer sampler.Done()
					t := time.NewTicker(randomSampleInterval)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							for _, h := range tr.Stats().Hosts {
								if h.HedgeWarm {
									delays = append(delays, h.HedgeDelay)
								}
							}
						}
					}
				}()
			}
			lat, bad := driveIndexed(&http.Client{Transport: rt}, url, res.Requests, res.Workers, onStart)
			close(stop)
			sampler.Wait()
			time.Sleep(20 * time.Millisecond) // let cancelled losers reach the server's count
			base.CloseIdleConnections()
			a := &accs[ci]
			all := slices.Clone(lat)
			slices.Sort(all)
			a.lat = append(a.lat, all...)
			a.p99s = append(a.p99s, percentile(all, .99))
			a.client += int64(len(lat))
			a.errs += bad
			a.srv += be.requests.Load()
			a.hedges += hedges.Load()
			a.delays = append(a.delays, delays...)
			if scenario == "randshift" {
				a.after = append(a.after, lat[res.Requests/2:]...)
				a.clientAfter += int64(len(lat) - res.Requests/2)
				a.srvAfter += be.requests.Load() - shiftAt.Load()
			}
		}
	}
	for ci, c := range cands {
		a := &accs[ci]
		slices.Sort(a.lat)
		slices.Sort(a.after)
		slices.Sort(a.delays)
		row := RandomRow{Name: c.name, P50: percentile(a.lat, .5), P99: percentile(a.lat, .99), P999: percentile(a.lat, .999),
			P99Lo: slices.Min(a.p99s), P99Hi: slices.Max(a.p99s), Client: a.client, Server: a.srv, Errors: a.errs,
			ExtraLoad: float64(a.srv)/float64(a.client) - 1, Hedges: a.hedges, Delays: a.delays}
		if a.clientAfter > 0 {
			row.P99After = percentile(a.after, .99)
			row.ExtraLoadAfter = float64(a.srvAfter)/float64(a.clientAfter) - 1
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// driveIndexed sends n GETs to url from `workers` goroutines and returns
// each request's latency (until its body is read and closed) in the order
// the requests started, and the number that failed. onStart, if set, runs
// before request i (from 0) is sent.
func driveIndexed(c *http.Client, url string, n, workers int, onStart func(i int)) (lat []time.Duration, bad int64) {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	lat = make([]time.Duration, n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if onStart != nil {
					onStart(i)
				}
				t0 := time.Now()
				resp, err := c.Get(url)
				finish(resp)
				lat[i] = time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return lat, failed.Load()
}

func (res *RandomResult) write(w io.Writer) {
	switch res.Scenario {
	case "randstall":
		fmt.Fprintf(w, "\n### Random stalls\n\nEvery server arrival takes about 1ms and is, independently, %.0f%% likely to take %v–%v more "+
			"(a seeded generator, a stream per arrival, so a hedge draws independently of its original).", 100*stallShare, stallMin, stallMax)
	case "randshift":
		fmt.Fprintf(w, "\n### Random stalls with a latency shift\n\nAs random stalls, but from the %dth request of each round on, the base latency is %v–%v instead of 1ms. "+
			"\"after\" is the second half's requests (p99) and the extra load while they ran.", res.Requests/2+1, shiftMin, shiftMax)
	case "lognormal":
		fmt.Fprintf(w, "\n### Lognormal latencies\n\nEvery server arrival draws a lognormal latency (median %v, σ %.2f: p95 %s, p99 %s), no distinct slow band.",
			lognormalMedian, lognormalSigma, fmtDur(time.Duration(float64(lognormalMedian)*math.Exp(lognormalSigma*1.6449))),
			fmtDur(time.Duration(float64(lognormalMedian)*math.Exp(lognormalSigma*2.3263))))
	}
	fmt.Fprintf(w, " %d GETs per round from %d goroutines, %d round(s), every candidate built afresh each round, latencies pooled; at most one hedge. "+
		"Extra load is the server's requests over the client's; failsafe-go's quantile hedging remembers %d executions and starts after %d.\n\n",
		res.Requests, res.Workers, res.Rounds, failsafeQuantileAge, failsafeMinRecorded)
	after := res.Scenario == "randshift"
	fmt.Fprintf(w, "| candidate | p50 | p99 (round range) | p99.9 | extra load |")
	if after {
		fmt.Fprintf(w, " p99 after | extra load after |")
	}
	fmt.Fprintf(w, " hedges | learned delay (p10 / p50 / p90) | errors |\n|---|---:|---:|---:|---:|")
	if after {
		fmt.Fprintf(w, "---:|---:|")
	}
	fmt.Fprintf(w, "---:|---|---:|\n")
	for _, r := range res.Rows {
		fmt.Fprintf(w, "| %s | %s | %s (%s–%s) | %s | %+.1f%% |", r.Name, fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P99Lo), fmtDur(r.P99Hi),
			fmtDur(r.P999), 100*r.ExtraLoad)
		if after {
			fmt.Fprintf(w, " %s | %+.1f%% |", fmtDur(r.P99After), 100*r.ExtraLoadAfter)
		}
		delay := "–"
		if len(r.Delays) > 0 {
			delay = fmt.Sprintf("%s / %s / %s", fmtDur(percentile(r.Delays, .1)), fmtDur(percentile(r.Delays, .5)), fmtDur(percentile(r.Delays, .9)))
		}
		fmt.Fprintf(w, " %d | %s | %d |\n", r.Hedges, delay, r.Errors)
	}
}

// goals returns issue 24's targets for adaptive hedging at MaxExtraLoad
// 5%, checked on this run.
func (res *RandomResult) goals() []goal {
	var adaptive RandomRow
	var fixed []RandomRow
	var learned RandomRow
	for _, r := range res.Rows {
		switch {
		case r.Name == gotryAdaptive(0.05).name:
			adaptive = r
		case r.Name == "failsafe-go learned p95 quantile":
			learned = r
		case len(r.Name) > 16 && r.Name[:16] == "gotry WithHedgin":
			fixed = append(fixed, r)
		}
	}
	if adaptive.Name == "" || len(fixed) == 0 {
		return nil
	}
	switch res.Scenario {
	case "randstall":
		// The best fixed delay within 5.5% extra load.
		best, ok := bestBy(fixed, func(r RandomRow) (time.Duration, bool) { return r.P99, r.ExtraLoad <= 0.055 })
		gs := []goal{{"random stalls: adaptive(5%) extra load ≤ 5.5%", fmt.Sprintf("%+.1f%%", 100*adaptive.ExtraLoad), adaptive.ExtraLoad <= 0.055}}
		if ok {
			gs = append(gs, goal{"random stalls: adaptive(5%) p99 ≤ 1.1× the best fixed delay within 5.5% load",
				fmt.Sprintf("%s vs %s (%s, %+.1f%%)", fmtDur(adaptive.P99), fmtDur(best.P99), best.Name, 100*best.ExtraLoad),
				float64(adaptive.P99) <= 1.1*float64(best.P99)})
		}
		if learned.Name != "" {
			gs = append(gs, goal{"random stalls: adaptive(5%) p99 ≤ failsafe-go's learned quantile at no more load",
				fmt.Sprintf("%s at %+.1f%% vs %s at %+.1f%%", fmtDur(adaptive.P99), 100*adaptive.ExtraLoad, fmtDur(learned.P99), 100*learned.ExtraLoad),
				adaptive.P99 <= learned.P99 && adaptive.ExtraLoad <= learned.ExtraLoad+0.002})
		}
		return gs
	case "randshift":
		best, _ := bestBy(fixed, func(r RandomRow) (time.Duration, bool) { return r.P99After, true })
		return []goal{{"shift: adaptive(5%) p99 after ≤ 0.5× the best fixed delay's",
			fmt.Sprintf("%s vs %s (%s) at %+.1f%% load after", fmtDur(adaptive.P99After), fmtDur(best.P99After), best.Name, 100*adaptive.ExtraLoadAfter),
			float64(adaptive.P99After) <= 0.5*float64(best.P99After)}}
	case "lognormal":
		// The fixed delays' p99 at adaptive's extra load, interpolated
		// linearly between the two fixed delays whose loads bracket it
		// (the nearest one's outside their range).
		at, between := fixedAtLoad(fixed, adaptive.ExtraLoad)
		return []goal{{"lognormal: adaptive(5%) p99 ≤ the fixed delays' at equal extra load",
			fmt.Sprintf("adaptive %s at %+.1f%%; fixed at that load %s (%s)", fmtDur(adaptive.P99), 100*adaptive.ExtraLoad, fmtDur(at), between),
			adaptive.P99 <= at}}
	}
	return nil
}

// fixedAtLoad interpolates the p99 of rows at extra load x, linearly
// between the two rows whose loads bracket x, or the nearest row's outside
// their range, and names the rows it used.
func fixedAtLoad(rows []RandomRow, x float64) (time.Duration, string) {
	rs := slices.Clone(rows)
	sort.Slice(rs, func(i, j int) bool { return rs[i].ExtraLoad < rs[j].ExtraLoad })
	if x <= rs[0].ExtraLoad {
		return rs[0].P99, rs[0].Name
	}
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		if x <= b.ExtraLoad {
			f := (x - a.ExtraLoad) / (b.ExtraLoad - a.ExtraLoad)
			return a.P99 + time.Duration(f*float64(b.P99-a.P99)), fmt.Sprintf("between %s at %+.1f%% and %s at %+.1f%%",
				a.Name, 100*a.ExtraLoad, b.Name, 100*b.ExtraLoad)
		}
	}
	last := rs[len(rs)-1]
	return last.P99, last.Name
}

// bestBy returns the row with the lowest key among those it accepts.
func bestBy(rows []RandomRow, key func(RandomRow) (time.Duration, bool)) (RandomRow, bool) {
	var ok []RandomRow
	for _, r := range rows {
		if _, yes := key(r); yes {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return RandomRow{}, false
	}
	sort.Slice(ok, func(i, j int) bool { a, _ := key(ok[i]); b, _ := key(ok[j]); return a < b })
	return ok[0], true
}
