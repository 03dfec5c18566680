package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cristalhq/hedgedhttp"
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
//     σ 1.25: p95 7.8ms, p99 18ms);
//   - bimodal: two services behind one host, 97% of answers in ~1ms and
//     3% from a slower one in 6–12ms;
//   - burst: stalls as randstall, 5% of arrivals in all, but four
//     consecutive arrivals at a time (several stalled requests within a
//     millisecond or two, as a pause on the server makes);
//   - loadstall: randstall on a loaded machine: besides the stalls, 4% of
//     arrivals wait for a CPU 0–10ms more (exponential, mean 3ms, cut at
//     10ms), a jitter tail that overlaps the hedge delays, as a shared
//     2-core box gives (the resilience package's simulation draws the same).
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
	bimodalShare         = 0.03 // the slower service's share of answers
	bimodalMin           = 6 * time.Millisecond
	bimodalMax           = 12 * time.Millisecond
	burstLen             = 4    // consecutive arrivals a burst stalls
	jitterShare          = 0.04 // loadstall: the share of arrivals that wait for a CPU
	jitterMean           = 3 * time.Millisecond
	jitterMax            = 10 * time.Millisecond
	// startingCredit is C, the adaptive candidate's starting credit at
	// MaxExtraLoad 5% (resilience.AdaptiveHedging's default): its extra
	// load in a round of n requests is held to at most 5% + C / n.
	startingCredit = 20
	// targetLoad is the most extra load a fixed delay may have in a round
	// to be the adaptive candidate's yardstick (the cap plus a tenth).
	targetLoad = 0.055
)

// latencyModel draws each server arrival's latency. Arrival n of a round
// draws from its own stream (seed, n), so the draws do not depend on how
// arrivals interleave, and a hedge's draw is independent of its original's.
type latencyModel struct {
	seed    uint64
	latency func(s *stream, seed uint64, n int64) time.Duration
}

func (m *latencyModel) draw(n int64) time.Duration {
	s := stream{state: m.seed ^ uint64(n)*0x9e3779b97f4a7c15}
	return m.latency(&s, m.seed, n)
}

// inBurst reports whether arrival n of the round seeded seed falls in a
// burst: one of the burstLen arrivals up to it opened one, each on its own
// with probability stallShare / burstLen (so stallShare of arrivals stall
// in all, burstLen in a row).
func inBurst(seed uint64, n int64) bool {
	for m := max(n-burstLen+1, 1); m <= n; m++ {
		s := stream{state: (seed ^ 0xb0b5) ^ uint64(m)*0xd1b54a32d192ed03}
		if s.float() < stallShare/burstLen {
			return true
		}
	}
	return false
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

// jitter adds, with probability jitterShare, a wait for a CPU to d:
// exponential with mean jitterMean, cut at jitterMax.
func jitter(s *stream, d time.Duration) time.Duration {
	if s.float() < jitterShare {
		return d + min(time.Duration(-math.Log(1-s.float())*float64(jitterMean)), jitterMax)
	}
	return d
}

// bimodal draws from two services: bimodalShare of answers take
// bimodalMin–bimodalMax, the others about 1ms.
func bimodal(s *stream) time.Duration {
	if s.float() < bimodalShare {
		return s.between(bimodalMin, bimodalMax)
	}
	return time.Millisecond
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
	// Runs are the figures of each round, in round order.
	Runs []RandomRun
}

// RandomRun is one candidate's figures in one round.
type RandomRun struct {
	P99, P999, P99After  time.Duration
	ExtraLoad, LoadAfter float64
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

// hedgedHTTP is cristalhq/hedgedhttp's round tripper: a fixed delay, at
// most one hedge (upto counts the original), no cap on extra load. Its
// hedges are counted from its stats when the round ends.
func hedgedHTTP(d time.Duration) randomCand {
	return randomCand{name: fmt.Sprintf("hedgedhttp fixed %v", d), build: func(b http.RoundTripper, n *atomic.Int64) http.RoundTripper {
		rt, stats, err := hedgedhttp.NewRoundTripperAndStats(d, 2, b)
		if err != nil {
			panic("bench: hedgedhttp: " + err.Error()) // only for a negative delay or upto
		}
		return countedRT{rt, func() { n.Store(int64(stats.ActualRoundTrips()) - int64(stats.RequestedRoundTrips())) }}
	}}
}

// countedRT is a round tripper whose hedge count is read by a function.
type countedRT struct {
	http.RoundTripper
	count func()
}

// fixedSweep are the fixed delays every random-latency scenario runs: the
// yardstick of the adaptive delay is the best of them in each round.
var fixedSweep = []time.Duration{2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond,
	7800 * time.Microsecond, 10 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond}

func randomCandidates() []randomCand {
	cs := []randomCand{{name: "no hedging (bare)", build: func(b http.RoundTripper, _ *atomic.Int64) http.RoundTripper { return b }}}
	for _, d := range fixedSweep {
		cs = append(cs, gotryFixed(d))
	}
	return append(cs,
		gotryAdaptive(0.05),
		failsafeHedge("failsafe-go learned p95 quantile", hedgepolicy.NewBuilderWithDelayQuantile[*http.Response](0.95, failsafeQuantileAge, failsafeMinRecorded)), //nolint:bodyclose // a builder, no response
		hedgedHTTP(5*time.Millisecond),
	)
}

// randomScenarios are the random-latency scenarios, in the order Run runs
// them.
var randomScenarios = []string{"randstall", "randshift", "lognormal", "bimodal", "burst", "loadstall"}

// runRandom runs one random-latency scenario of randomScenarios.
func runRandom(cfg *Config, scenario string) (*RandomResult, error) {
	res := &RandomResult{Scenario: scenario, Requests: cfg.randomRequests, Workers: 4, Rounds: cfg.Rounds}
	var shifted atomic.Bool
	model := func(s *stream, _ uint64, _ int64) time.Duration { return stalls(s, time.Millisecond) }
	switch scenario {
	case "randshift":
		model = func(s *stream, _ uint64, _ int64) time.Duration {
			if shifted.Load() {
				return stalls(s, s.between(shiftMin, shiftMax))
			}
			return stalls(s, time.Millisecond)
		}
	case "lognormal":
		model = func(s *stream, _ uint64, _ int64) time.Duration { return lognormal(s) }
	case "bimodal":
		model = func(s *stream, _ uint64, _ int64) time.Duration { return bimodal(s) }
	case "loadstall":
		model = func(s *stream, _ uint64, _ int64) time.Duration { return jitter(s, stalls(s, time.Millisecond)) }
	case "burst":
		model = func(s *stream, seed uint64, n int64) time.Duration {
			if inBurst(seed, n) {
				return time.Millisecond + s.between(stallMin, stallMax)
			}
			return time.Millisecond
		}
	}
	cands := randomCandidates()
	be := newBackend()
	defer be.Close()
	url := be.URL() + "/item"
	type acc struct {
		lat, after   []time.Duration
		p99s         []time.Duration
		runs         []RandomRun
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
			if c, ok := rt.(countedRT); ok {
				c.count()
			}
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
			run := RandomRun{P99: percentile(all, .99), P999: percentile(all, .999),
				ExtraLoad: float64(be.requests.Load())/float64(len(lat)) - 1}
			if scenario == "randshift" {
				after := slices.Clone(lat[res.Requests/2:])
				a.after = append(a.after, after...)
				a.clientAfter += int64(len(after))
				srvAfter := be.requests.Load() - shiftAt.Load()
				a.srvAfter += srvAfter
				slices.Sort(after)
				run.P99After = percentile(after, .99)
				run.LoadAfter = float64(srvAfter)/float64(len(after)) - 1
			}
			a.runs = append(a.runs, run) // one per round: a candidate runs once a round
		}
	}
	for ci, c := range cands {
		a := &accs[ci]
		slices.Sort(a.lat)
		slices.Sort(a.after)
		slices.Sort(a.delays)
		row := RandomRow{Name: c.name, P50: percentile(a.lat, .5), P99: percentile(a.lat, .99), P999: percentile(a.lat, .999),
			P99Lo: slices.Min(a.p99s), P99Hi: slices.Max(a.p99s), Client: a.client, Server: a.srv, Errors: a.errs,
			ExtraLoad: float64(a.srv)/float64(a.client) - 1, Hedges: a.hedges, Delays: a.delays, Runs: a.runs}
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
	case "bimodal":
		fmt.Fprintf(w, "\n### Bimodal latencies\n\nTwo services behind one host: every server arrival is, independently, %.0f%% likely to take %v–%v, otherwise 1ms.",
			100*bimodalShare, bimodalMin, bimodalMax)
	case "burst":
		fmt.Fprintf(w, "\n### Stalls in bursts\n\nAbout 1ms per request, but %d consecutive server arrivals at a time take %v–%v more (each arrival opens such a burst "+
			"with probability %.2f%%, so %.0f%% of arrivals stall, several within a millisecond or two).",
			burstLen, stallMin, stallMax, 100*stallShare/burstLen, 100*stallShare)
	case "loadstall":
		fmt.Fprintf(w, "\n### Stalls on a loaded machine\n\nAs random stalls, and %.0f%% of arrivals wait for a CPU up to %v more (exponential, mean %v): a jitter tail that overlaps the hedge delays.",
			100*jitterShare, jitterMax, jitterMean)
	}
	fmt.Fprintf(w, " %d GETs per round from %d goroutines, %d round(s), every candidate built afresh each round; at most one hedge. "+
		"Each figure is per round: the worst and the median of the rounds. "+
		"Extra load is the server's requests over the client's; failsafe-go's quantile hedging remembers %d executions and starts after %d.\n\n",
		res.Requests, res.Workers, res.Rounds, failsafeQuantileAge, failsafeMinRecorded)
	after := res.Scenario == "randshift"
	fmt.Fprintf(w, "| candidate | p50 | p99 worst / median | p99.9 worst / median | extra load worst / median |")
	if after {
		fmt.Fprintf(w, " p99 after worst / median | extra load after worst / median |")
	}
	fmt.Fprintf(w, " hedges | learned delay (p10 / p50 / p90) | errors |\n|---|---:|---:|---:|---:|")
	if after {
		fmt.Fprintf(w, "---:|---:|")
	}
	fmt.Fprintf(w, "---:|---|---:|\n")
	for _, r := range res.Rows {
		p99, p999, load := worstMedian(r.Runs, func(x RandomRun) float64 { return float64(x.P99) }),
			worstMedian(r.Runs, func(x RandomRun) float64 { return float64(x.P999) }),
			worstMedian(r.Runs, func(x RandomRun) float64 { return x.ExtraLoad })
		fmt.Fprintf(w, "| %s | %s | %s / %s | %s / %s | %+.1f%% / %+.1f%% |", r.Name, fmtDur(r.P50),
			fmtDur(time.Duration(p99[0])), fmtDur(time.Duration(p99[1])), fmtDur(time.Duration(p999[0])), fmtDur(time.Duration(p999[1])),
			100*load[0], 100*load[1])
		if after {
			pa, la := worstMedian(r.Runs, func(x RandomRun) float64 { return float64(x.P99After) }),
				worstMedian(r.Runs, func(x RandomRun) float64 { return x.LoadAfter })
			fmt.Fprintf(w, " %s / %s | %+.1f%% / %+.1f%% |", fmtDur(time.Duration(pa[0])), fmtDur(time.Duration(pa[1])), 100*la[0], 100*la[1])
		}
		delay := "–"
		if len(r.Delays) > 0 {
			delay = fmt.Sprintf("%s / %s / %s", fmtDur(percentile(r.Delays, .1)), fmtDur(percentile(r.Delays, .5)), fmtDur(percentile(r.Delays, .9)))
		}
		fmt.Fprintf(w, " %d | %s | %d |\n", r.Hedges, delay, r.Errors)
	}
	if cmp := res.compare(); len(cmp) > 0 {
		fmt.Fprintf(w, "\nThe adaptive delay (5%%) against its yardsticks, round by round:\n\n")
		fmt.Fprintf(w, "| round | adaptive p99 / p99.9 / load | best fixed delay within %.1f%% that round | p99 ratio | p99.9 ratio | failsafe-go quantile p99 |", 100*targetLoad)
		if after {
			fmt.Fprintf(w, " p99 after ÷ best fixed delay's after |")
		}
		fmt.Fprintf(w, "\n|---:|---|---|---:|---:|---:|")
		if after {
			fmt.Fprintf(w, "---:|")
		}
		fmt.Fprintln(w)
		for i, c := range cmp {
			best, r99, r999 := "none", "–", "–"
			if c.best != "" {
				best = fmt.Sprintf("%s: %s / %s / %+.1f%%", c.best, fmtDur(c.fixed.P99), fmtDur(c.fixed.P999), 100*c.fixed.ExtraLoad)
				r99, r999 = fmt.Sprintf("%.2f", c.r99), fmt.Sprintf("%.2f", c.r999)
			}
			fmt.Fprintf(w, "| %d | %s / %s / %+.1f%% | %s | %s | %s | %s |", i+1, fmtDur(c.adaptive.P99), fmtDur(c.adaptive.P999),
				100*c.adaptive.ExtraLoad, best, r99, r999, fmtDur(c.failsafe.P99))
			if after {
				fmt.Fprintf(w, " %.2f (%s) |", c.rAfter, c.bestAfter)
			}
			fmt.Fprintln(w)
		}
	}
}

// worstMedian returns the largest and the median of f over runs (the
// upper median for an even count).
func worstMedian(runs []RandomRun, f func(RandomRun) float64) [2]float64 {
	if len(runs) == 0 {
		return [2]float64{}
	}
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	return [2]float64{xs[len(xs)-1], xs[len(xs)/2]}
}

// roundCompare is the adaptive candidate's round against its yardsticks:
// the fixed delay with the lowest p99 among those whose extra load that
// round was at most targetLoad, and failsafe-go's learned quantile.
type roundCompare struct {
	adaptive, fixed, failsafe RandomRun
	best                      string  // the fixed delay's name, "" if none was within targetLoad
	r99, r999                 float64 // adaptive ÷ that fixed delay
	rAfter                    float64 // p99 after the shift ÷ the fixed delays' lowest (randshift)
	bestAfter                 string
}

// compare returns the adaptive candidate's rounds against its
// yardsticks, or nil if a candidate is missing.
func (res *RandomResult) compare() []roundCompare {
	var adaptive, learned *RandomRow
	var fixed []*RandomRow
	for i := range res.Rows {
		r := &res.Rows[i]
		switch {
		case r.Name == gotryAdaptive(0.05).name:
			adaptive = r
		case r.Name == "failsafe-go learned p95 quantile":
			learned = r
		case strings.HasPrefix(r.Name, "gotry WithHedging("):
			fixed = append(fixed, r)
		}
	}
	if adaptive == nil || learned == nil || len(fixed) == 0 {
		return nil
	}
	out := make([]roundCompare, len(adaptive.Runs))
	for i, a := range adaptive.Runs {
		c := roundCompare{adaptive: a, failsafe: learned.Runs[i]}
		var afterBest time.Duration
		for _, f := range fixed {
			fr := f.Runs[i]
			if fr.ExtraLoad <= targetLoad && (c.best == "" || fr.P99 < c.fixed.P99) {
				c.best, c.fixed = f.Name, fr
			}
			if c.bestAfter == "" || fr.P99After < afterBest {
				c.bestAfter, afterBest = f.Name, fr.P99After
			}
		}
		if c.best != "" {
			c.r99, c.r999 = float64(a.P99)/float64(c.fixed.P99), float64(a.P999)/float64(c.fixed.P999)
		}
		if afterBest > 0 {
			c.rAfter = float64(a.P99After) / float64(afterBest)
		}
		out[i] = c
	}
	return out
}

// goals are issue 31's targets for adaptive hedging at MaxExtraLoad 5%, in
// the worst round of this run.
func (res *RandomResult) goals() []goal {
	cmp := res.compare()
	if len(cmp) == 0 {
		return nil
	}
	name := map[string]string{"randstall": "random stalls", "randshift": "shift", "lognormal": "lognormal",
		"bimodal": "bimodal", "burst": "bursts", "loadstall": "stalls on a loaded machine"}[res.Scenario]
	var r99, r999, load, vsFS, after []float64
	missing := 0
	for _, c := range cmp {
		load = append(load, c.adaptive.ExtraLoad)
		vsFS = append(vsFS, float64(c.adaptive.P99)/float64(c.failsafe.P99))
		after = append(after, c.rAfter)
		if c.best == "" {
			missing++
			continue
		}
		r99, r999 = append(r99, c.r99), append(r999, c.r999)
	}
	wm := func(xs []float64) (float64, float64) {
		if len(xs) == 0 {
			return 0, 0
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)-1], s[len(s)/2]
	}
	lw, lm := wm(load)
	bound := 0.05 + float64(startingCredit)/float64(res.Requests) // the cap + C / calls
	loadGoal := fmt.Sprintf("adaptive(5%%) extra load ≤ 5%% + C/calls (%.2f%%), worst round", 100*bound)
	if res.Scenario == "randshift" {
		aw, am := wm(after)
		return []goal{
			{"shift: adaptive(5%) p99 after ≤ 0.5× the best fixed delay's, worst round", fmt.Sprintf("worst %.2f×, median %.2f×", aw, am), aw <= 0.5},
			{"shift: " + loadGoal, fmt.Sprintf("worst %+.1f%%, median %+.1f%%", 100*lw, 100*lm), lw <= bound},
		}
	}
	w99, m99 := wm(r99)
	w999, m999 := wm(r999)
	fw, fm := wm(vsFS)
	note := ""
	if missing > 0 {
		note = fmt.Sprintf(" (%d round(s) had no fixed delay within 5.5%%)", missing)
	}
	return []goal{
		{name + ": adaptive(5%) p99 ≤ 1.1× the best fixed delay within 5.5% that round, worst round",
			fmt.Sprintf("worst %.2f×, median %.2f×%s", w99, m99, note), len(r99) > 0 && w99 <= 1.1},
		{name + ": adaptive(5%) p99.9 ≤ 1.25× that fixed delay's, worst round",
			fmt.Sprintf("worst %.2f×, median %.2f×%s", w999, m999, note), len(r999) > 0 && w999 <= 1.25},
		{name + ": " + loadGoal, fmt.Sprintf("worst %+.2f%%, median %+.2f%%", 100*lw, 100*lm), lw <= bound},
		{name + ": adaptive(5%) p99 ≤ failsafe-go's learned quantile, worst round", fmt.Sprintf("worst %.2f×, median %.2f×", fw, fm), fw <= 1},
	}
}
