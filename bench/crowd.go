package bench

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The fleet scenario (issue 28): the overload scenario's capacity drop
// where the load comes from many clients, each with its own transport (its
// own limit, budget and connections), as replicas of a service sharing one
// downstream; and the overload shapes a single busy client does not show:
// a slow low-rate host, a server that sheds by itself (a small queue, 503
// at once when it is full), heavy-tailed service times, microbursts. Every
// candidate runs the same seeded arrivals against a fresh server.

// CrowdConfig is one shape of the fleet scenario. Zero fields take the
// preset's value (Shape), then the defaults in brackets.
type CrowdConfig struct {
	Shape    string        // a preset, see crowdShapes ["fleet"]
	Clients  int           // clients sharing the server [20]
	Capacity int           // requests the server serves at once [16]
	Service  time.Duration // mean service time [10ms]
	Load     float64       // offered load of all clients together, a share of capacity [0.7]
	Factor   float64       // service time multiplier during the drop (1: no drop) [2]
	Deadline time.Duration // every attempt's timeout [100ms]
	Server   string        // "fifo" (an unbounded queue) or "fastfail" (503 at once past Queue waiting) ["fifo"]
	Queue    int           // fastfail: how many may wait [Capacity]
	Dist     string        // service times: "fixed", "lognormal" (σ 1) or "pareto" (α 1.5), mean Service ["fixed"]
	Burst    float64       // arrivals this many times as fast for 50ms of every 500ms, slower between, same mean (0: Poisson)
	Before   time.Duration // before the drop [3s]
	Drop     time.Duration // the drop [4s]
	After    time.Duration // after the drop [4s]
	Steady   time.Duration // the run without a drop [5s]
	Rounds   int           // interleaved rounds [3]
	Only     string        // run only the candidates whose name contains this (case-insensitive) ["": all]
}

// crowdShapes are the presets: the shapes issue 28 measured.
var crowdShapes = map[string]CrowdConfig{
	// 20 clients share 16 workers × 10 ms at 70%; the service time doubles.
	"fleet": {},
	// One client, a slow low-rate host: 2 workers × 200 ms, 7 requests/s,
	// a 1 s attempt timeout.
	"slowhost": {Clients: 1, Capacity: 2, Service: 200 * time.Millisecond, Deadline: time.Second, After: 8 * time.Second},
	// A server that sheds by itself: at most Capacity waiting, then 503.
	"fastfail": {Server: "fastfail"},
	// Steady state below capacity: Pareto service times at 85%, or
	// microbursts at 90%.
	"pareto":  {Dist: "pareto", Load: 0.85, Factor: 1},
	"bursts":  {Burst: 3, Load: 0.9, Factor: 1},
	"single":  {Clients: 1, Service: 5 * time.Millisecond},
	"fleet50": {Clients: 50},
}

// CrowdShapes lists the presets, sorted.
func CrowdShapes() []string {
	var s []string
	for k := range crowdShapes {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

func (f *CrowdConfig) setDefaults(quick bool) error {
	if f.Shape == "" {
		f.Shape = "fleet"
	}
	p, ok := crowdShapes[f.Shape]
	if !ok {
		return fmt.Errorf("bench: unknown fleet shape %q (have %s)", f.Shape, strings.Join(CrowdShapes(), ", "))
	}
	pick := func(v, preset, def int) int { return firstNonZero(firstNonZero(v, preset), def) }
	f.Clients = pick(f.Clients, p.Clients, 20)
	f.Capacity = pick(f.Capacity, p.Capacity, 16)
	f.Queue = pick(f.Queue, p.Queue, f.Capacity)
	f.Rounds = pick(f.Rounds, p.Rounds, 3)
	f.Service = firstNonZero(firstNonZero(f.Service, p.Service), 10*time.Millisecond)
	f.Deadline = firstNonZero(firstNonZero(f.Deadline, p.Deadline), 100*time.Millisecond)
	f.Load = firstNonZero(firstNonZero(f.Load, p.Load), 0.7)
	f.Factor = firstNonZero(firstNonZero(f.Factor, p.Factor), 2)
	f.Burst = firstNonZero(f.Burst, p.Burst)
	f.Server = firstNonZero(firstNonZero(f.Server, p.Server), "fifo")
	f.Dist = firstNonZero(firstNonZero(f.Dist, p.Dist), "fixed")
	if f.Server != "fifo" && f.Server != "fastfail" {
		return fmt.Errorf("bench: fleet server %q, want fifo or fastfail", f.Server)
	}
	if f.Dist != "fixed" && f.Dist != "lognormal" && f.Dist != "pareto" {
		return fmt.Errorf("bench: fleet service-time distribution %q, want fixed, lognormal or pareto", f.Dist)
	}
	def := func(d *time.Duration, preset, full, q time.Duration) {
		switch {
		case *d > 0:
		case quick:
			*d = q
		default:
			*d = firstNonZero(preset, full)
		}
	}
	def(&f.Before, p.Before, 3*time.Second, 300*time.Millisecond)
	def(&f.Drop, p.Drop, 4*time.Second, 400*time.Millisecond)
	def(&f.After, p.After, 4*time.Second, 600*time.Millisecond)
	def(&f.Steady, p.Steady, 5*time.Second, 300*time.Millisecond)
	if quick {
		f.Rounds = 1
		f.Clients = min(f.Clients, 5)
	}
	return nil
}

func firstNonZero[T comparable](v, or T) T {
	var zero T
	if v == zero {
		return or
	}
	return v
}

// capacity is what the server serves per second at its normal service time.
func (f *CrowdConfig) capacity() float64 { return float64(f.Capacity) / f.Service.Seconds() }

// crowdServer is the overload scenario's virtual-queue server (see
// queueServer) with service times drawn from a distribution and, for
// "fastfail", a bounded queue: a request that would wait longer than it
// takes to serve Queue requests ahead of it is answered 503 at once.
type crowdServer struct {
	srv              *httptest.Server
	cfg              *CrowdConfig
	t0               time.Time
	dropFrom, dropTo time.Duration
	arrivals         []atomic.Int64
	rejected         atomic.Int64

	mu   sync.Mutex
	free []time.Time // when each worker is next free; guarded by mu
	rng  *rand.Rand  // guarded by mu
}

func newCrowdServer(f *CrowdConfig, t0 time.Time, total, dropFrom, dropTo time.Duration, seed uint64) *crowdServer {
	s := &crowdServer{cfg: f, t0: t0, dropFrom: dropFrom, dropTo: dropTo,
		arrivals: make([]atomic.Int64, int(total/arrivalBin)+64), free: make([]time.Time, f.Capacity),
		rng: rand.New(rand.NewPCG(seed, 28))}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.Protocols = h2c()
	s.srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	s.srv.Start()
	return s
}

func (s *crowdServer) URL() string { return s.srv.URL + "/item" }
func (s *crowdServer) Close()      { s.srv.Close() }

// book reserves the first free worker for a request arriving at now and
// returns when its service ends; ok is false when a fastfail server's
// queue is full.
func (s *crowdServer) book(now time.Time) (end time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, start := firstFree(s.free, now)
	mean := s.cfg.Service
	if off := start.Sub(s.t0); off >= s.dropFrom && off < s.dropTo {
		mean = time.Duration(float64(mean) * s.cfg.Factor)
	}
	if s.cfg.Server == "fastfail" {
		// Queue requests ahead of it take Queue/Capacity service times.
		if wait := start.Sub(now); wait > time.Duration(float64(mean)*float64(s.cfg.Queue)/float64(s.cfg.Capacity)) {
			return time.Time{}, false
		}
	}
	d := float64(mean)
	switch s.cfg.Dist {
	case "lognormal": // σ 1, mean 1
		d *= math.Exp(s.rng.NormFloat64() - 0.5)
	case "pareto": // α 1.5, mean 1
		const alpha = 1.5
		d *= (alpha - 1) / alpha / math.Pow(1-s.rng.Float64(), 1/alpha)
	}
	s.free[w] = start.Add(time.Duration(d))
	return s.free[w], true
}

func (s *crowdServer) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if i := int(now.Sub(s.t0) / arrivalBin); i >= 0 && i < len(s.arrivals) {
		s.arrivals[i].Add(1)
	}
	end, ok := s.book(now)
	if !ok {
		s.rejected.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if sleepCtx(r.Context(), time.Until(end)) {
		_, _ = io.WriteString(w, "ok") // a client that went away cannot be told
	}
}

// arrivalsPer returns the server's arrivals per window over [0, total).
func (s *crowdServer) arrivalsPer(window, total time.Duration) []int64 {
	return perWindow(s.arrivals, window, total)
}

// crowdCandidate builds one client's transport over its own base.
type crowdCandidate struct {
	name string
	make func(base http.RoundTripper, f *CrowdConfig) *http.Client
}

func crowdCandidates() []crowdCandidate {
	return []crowdCandidate{
		{"no retries", func(b http.RoundTripper, f *CrowdConfig) *http.Client {
			return &http.Client{Transport: b, Timeout: f.Deadline}
		}},
		{"gotry, no limit", func(b http.RoundTripper, f *CrowdConfig) *http.Client {
			return &http.Client{Transport: transport.New(b, transport.WithPerAttemptTimeout(f.Deadline))}
		}},
		{"gotry + limit", func(b http.RoundTripper, f *CrowdConfig) *http.Client {
			return &http.Client{Transport: transport.New(b, transport.WithPerAttemptTimeout(f.Deadline),
				transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}))}
		}},
		{"failsafe-go retry + adaptivelimiter", func(b http.RoundTripper, f *CrowdConfig) *http.Client {
			return &http.Client{Transport: failsafeLimited(b, overloadRetry, f.Deadline)}
		}},
	}
}

// microburstLen and microburstEvery shape the microbursts.
const (
	microburstLen   = 50 * time.Millisecond
	microburstEvery = 500 * time.Millisecond
)

// crowdArrivals returns the offsets at which one client offering rate
// requests per second over d sends them: Poisson, or with microbursts
// (burst times as fast for microburstLen of every microburstEvery, slower between,
// at the same mean).
func crowdArrivals(rate float64, d time.Duration, burst float64, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 28))
	slow := rate
	if burst > 0 {
		slow = rate * float64(microburstEvery) / (float64(microburstEvery-microburstLen) + burst*float64(microburstLen))
	}
	var ts []time.Duration
	for t := time.Duration(0); t < d; {
		r := slow
		if burst > 0 && t%microburstEvery < microburstLen {
			r = burst * slow
		}
		t += time.Duration(rng.ExpFloat64() / r * float64(time.Second))
		ts = append(ts, t)
	}
	return ts[:len(ts)-1]
}

// CrowdRun is one candidate's run of one shape: with the drop, or steady.
type CrowdRun struct {
	Offered   float64       // requests per second, all clients
	Normal    float64       // goodput before the drop, per second
	Goodput   float64       // goodput during the drop (the whole run when steady), per second
	Recovery  time.Duration // from the drop's end until goodput over a window (≥ 500ms, ~20 requests) is back at ≥ 90% of Normal; -1: not within the run
	Fairness  float64       // the least-served client's goodput during the drop ÷ the best-served one's
	Peak      float64       // the most server arrivals in one window ÷ the requests started in it
	Rejected  int64         // 503s the server answered
	Shed      int           // requests refused locally
	Requests  int
	P50, P99  time.Duration
	GoodTotal int // successful requests in the run
}

// CrowdRow is one candidate over every round.
type CrowdRow struct {
	Name         string
	Drop, Steady []CrowdRun
}

// CrowdResult is the fleet tables.
type CrowdResult struct {
	Config CrowdConfig
	Rows   []CrowdRow
}

func runCrowd(cfg *Config) (*CrowdResult, error) {
	f := cfg.Crowd
	if err := f.setDefaults(cfg.Quick); err != nil {
		return nil, err
	}
	res := &CrowdResult{Config: f}
	cands := crowdCandidates()
	if f.Only != "" {
		var keep []crowdCandidate
		for _, c := range cands {
			if strings.Contains(strings.ToLower(c.name), strings.ToLower(f.Only)) {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			return nil, fmt.Errorf("bench: no fleet candidate's name contains %q", f.Only)
		}
		cands = keep
	}
	res.Rows = make([]CrowdRow, len(cands))
	for round := range f.Rounds {
		for ci, c := range cands {
			res.Rows[ci].Name = c.name
			if f.Factor != 1 {
				cfg.progress("fleet %s: round %d, %s", f.Shape, round+1, c.name)
				res.Rows[ci].Drop = append(res.Rows[ci].Drop, crowdRound(&f, c, f.Before, f.Before+f.Drop, f.Before+f.Drop+f.After, uint64(round)))
			}
			cfg.progress("fleet %s (steady): round %d, %s", f.Shape, round+1, c.name)
			res.Rows[ci].Steady = append(res.Rows[ci].Steady, crowdRound(&f, c, 0, 0, f.Steady, uint64(round)+1000))
		}
	}
	return res, nil
}

// crowdRound runs candidate c's clients against a fresh server for total,
// the drop over [dropFrom, dropTo) (none when they are equal).
func crowdRound(f *CrowdConfig, c crowdCandidate, dropFrom, dropTo, total time.Duration, seed uint64) CrowdRun {
	t0 := time.Now().Add(20 * time.Millisecond)
	srv := newCrowdServer(f, t0, total, dropFrom, dropTo, seed)
	defer srv.Close()
	perClient := f.Load * f.capacity() / float64(f.Clients)
	recs := make([][]record, f.Clients)
	var wg sync.WaitGroup
	for i := range f.Clients {
		wg.Go(func() {
			base := newH2CBase()
			defer base.CloseIdleConnections()
			at := crowdArrivals(perClient, total, f.Burst, seed*1000+uint64(i))
			recs[i] = poissonLoop(c.make(base, f), srv.URL(), at, t0)
		})
	}
	wg.Wait()
	var all []record
	for _, r := range recs {
		all = append(all, r...)
	}
	run := CrowdRun{Offered: float64(len(all)) / total.Seconds(), Requests: len(all), Rejected: srv.rejected.Load()}
	good := goodputBins(all, total)
	for _, g := range good {
		run.GoodTotal += int(g)
	}
	run.Shed, run.P50, run.P99 = summarize(all)
	if dropTo == dropFrom {
		run.Goodput = float64(run.GoodTotal) / total.Seconds()
		return run
	}
	// Normal is the mean goodput over the last two thirds before the drop
	// (the overload scenario's median bin is 0 at a few requests a
	// second), and recovery is judged over a window that holds about 20 of
	// them at that rate, at least recoveryWindow.
	sum := func(from, to time.Duration) (n int64) {
		for i := int(from / arrivalBin); i < int(to/arrivalBin); i++ {
			n += good[i]
		}
		return n
	}
	run.Normal = float64(sum(dropFrom/3, dropFrom)) / (dropFrom - dropFrom/3).Seconds()
	run.Goodput = float64(sum(dropFrom, dropTo)) / (dropTo - dropFrom).Seconds()
	window := recoveryWindow
	if run.Normal > 0 {
		window = max(window, (time.Duration(20/run.Normal*float64(time.Second))/arrivalBin+1)*arrivalBin)
	}
	run.Recovery = -1
	for b := dropTo; b+window <= total; b += arrivalBin {
		if float64(sum(b, b+window))/window.Seconds() >= 0.9*run.Normal {
			run.Recovery = b - dropTo
			break
		}
	}
	least, most := math.MaxInt, 0
	for _, rs := range recs {
		k := 0
		for _, r := range rs {
			if r.ok && r.end >= dropFrom && r.end < dropTo {
				k++
			}
		}
		least, most = min(least, k), max(most, k)
	}
	run.Fairness = float64(least) / float64(max(most, 1))
	peakWindow := min(time.Second, (dropTo-dropFrom)/2)
	started := make([]int64, int(total/peakWindow)+1)
	for _, r := range all {
		if i := int(r.start / peakWindow); i < len(started) {
			started[i]++
		}
	}
	for i, a := range srv.arrivalsPer(peakWindow, total) {
		run.Peak = max(run.Peak, float64(a)/float64(max(started[i], 1)))
	}
	return run
}

func (res *CrowdResult) write(w io.Writer) {
	f := res.Config
	arrivals := "Poisson arrivals"
	if f.Burst > 0 {
		arrivals = fmt.Sprintf("microbursts (%g× as fast for %v of every %v)", f.Burst, microburstLen, microburstEvery)
	}
	server := "one FIFO queue"
	if f.Server == "fastfail" {
		server = fmt.Sprintf("a queue of at most %d, 503 at once when full", f.Queue)
	}
	fmt.Fprintf(w, "\n### Concurrency limit, many clients: %s\n\n", f.Shape)
	fmt.Fprintf(w, "%d clients, each with its own transport and connections, share a loopback server (HTTP/2 without TLS) of %d workers × %v (%s service times, %.0f/s), %s. "+
		"Together they offer %.0f%% of its capacity (%.0f requests/s, %s), every attempt with a %v timeout. ",
		f.Clients, f.Capacity, f.Service, f.Dist, f.capacity(), server, 100*f.Load, f.Load*f.capacity(), arrivals, f.Deadline)
	if f.Factor != 1 {
		fmt.Fprintf(w, "After %v the service time is multiplied by %g for %v (the server can serve %.0f/s), then the run goes on for %v. ",
			f.Before, f.Factor, f.Drop, f.capacity()/f.Factor, f.After)
	}
	fmt.Fprintf(w, "Medians of %d interleaved rounds (range). \"Fairness\" is the least-served client's goodput during the drop ÷ the best-served one's; \"503s\" are the server's.\n\n", f.Rounds)
	if f.Factor != 1 {
		drop := f.capacity() / f.Factor
		fmt.Fprintf(w, "| client | goodput during the drop | of the %.0f/s it could serve | back to normal | fairness | peak arrivals ÷ offered | 503s | shed | p99 |\n", drop)
		fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range res.Rows {
			d := r.Drop
			fmt.Fprintf(w, "| %s | %s/s | %.0f%% | %s | %s | %s | %s | %.2f%% | %s |\n", r.Name,
				rangeOf(d, func(x CrowdRun) float64 { return x.Goodput }, "%.0f"),
				100*medianOf(d, func(x CrowdRun) float64 { return x.Goodput })/drop,
				fmtRecovery(toOverloadRuns(d)),
				rangeOf(d, func(x CrowdRun) float64 { return x.Fairness }, "%.2f"),
				rangeOf(d, func(x CrowdRun) float64 { return x.Peak }, "%.2f×"),
				rangeOf(d, func(x CrowdRun) float64 { return float64(x.Rejected) }, "%.0f"),
				100*medianOf(d, func(x CrowdRun) float64 { return float64(x.Shed) / float64(max(x.Requests, 1)) }),
				fmtDur(time.Duration(medianOf(d, func(x CrowdRun) float64 { return float64(x.P99) }))))
		}
		fmt.Fprintf(w, "\nThe same load for %v without a drop:\n\n", f.Steady)
	}
	fmt.Fprintf(w, "| client | offered/s | goodput ÷ offered | 503s | shed | p50 | p99 |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Rows {
		s := r.Steady
		fmt.Fprintf(w, "| %s | %.0f | %.2f%% | %.0f | %d of %d | %s | %s |\n", r.Name,
			medianOf(s, func(x CrowdRun) float64 { return x.Offered }),
			100*medianOf(s, func(x CrowdRun) float64 { return x.Goodput / x.Offered }),
			medianOf(s, func(x CrowdRun) float64 { return float64(x.Rejected) }),
			int(medianOf(s, func(x CrowdRun) float64 { return float64(x.Shed) })),
			int(medianOf(s, func(x CrowdRun) float64 { return float64(x.Requests) })),
			fmtDur(time.Duration(medianOf(s, func(x CrowdRun) float64 { return float64(x.P50) }))),
			fmtDur(time.Duration(medianOf(s, func(x CrowdRun) float64 { return float64(x.P99) }))))
	}
}

// toOverloadRuns carries the recovery times over for fmtRecovery.
func toOverloadRuns(runs []CrowdRun) []OverloadRun {
	out := make([]OverloadRun, len(runs))
	for i, r := range runs {
		out[i].Recovery = r.Recovery
	}
	return out
}
