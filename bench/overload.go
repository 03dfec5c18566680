package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/MrVSiK/gotry/resilience"
	"github.com/MrVSiK/gotry/transport"
)

// The overload scenario (issue 23): a metastable-failure test after Bronson
// et al., "Metastable Failures in Distributed Systems" (HotOS 2021). A
// loopback server with a fixed capacity is offered a steady share of it;
// for a while its service time grows (its capacity drops), then returns to
// normal. A client that keeps sending work the server cannot finish in time
// keeps the queue full after the drop is over; one that backs off lets it
// drain.

// OverloadConfig is the overload scenario's shape. Zero fields take the
// defaults in brackets.
type OverloadConfig struct {
	Capacity int           // requests the server serves at once [16]
	Service  time.Duration // service time of one request [5ms]: capacity Capacity/Service per second
	Load     float64       // offered load, a fraction of capacity [0.7]
	Factor   float64       // service time multiplier during the drop [2]
	Drop     time.Duration // how long the drop lasts [4s]
	Deadline time.Duration // every attempt's timeout [100ms]
	Before   time.Duration // run time before the drop [3s]
	After    time.Duration // run time after the drop [8s]
	Steady   time.Duration // length of the run without a drop [5s]
	Fixed    bool          // fixed-rate arrivals instead of Poisson
	Rounds   int           // interleaved rounds [3]
}

func (o *OverloadConfig) setDefaults(quick bool) {
	def := func(d *time.Duration, full, q time.Duration) {
		if *d <= 0 {
			*d = full
			if quick {
				*d = q
			}
		}
	}
	if o.Capacity <= 0 {
		o.Capacity = 16
	}
	if o.Service <= 0 {
		o.Service = 5 * time.Millisecond
	}
	if o.Load <= 0 {
		o.Load = 0.7
	}
	if o.Factor <= 0 {
		o.Factor = 2
	}
	if o.Deadline <= 0 {
		o.Deadline = 100 * time.Millisecond
	}
	def(&o.Drop, 4*time.Second, 400*time.Millisecond)
	def(&o.Before, 3*time.Second, 300*time.Millisecond)
	def(&o.After, 8*time.Second, 600*time.Millisecond)
	def(&o.Steady, 5*time.Second, 300*time.Millisecond)
	if o.Rounds <= 0 {
		o.Rounds = 3
		if quick {
			o.Rounds = 1
		}
	}
}

// capacity is what the server serves per second at its normal service time.
func (o *OverloadConfig) capacity() float64 { return float64(o.Capacity) / o.Service.Seconds() }

// rate is the offered load in requests per second.
func (o *OverloadConfig) rate() float64 { return o.Load * o.capacity() }

// queueServer serves capacity requests at a time, first come first served,
// each for its service time: a virtual queue books every arrival on the
// worker that frees first, so a request costs its service time whether or
// not its client still waits for the answer (a real server finds out that a
// client left only when it writes). The handler waits until its booked end
// and answers 200, or returns at once when its client has gone.
type queueServer struct {
	srv               *httptest.Server
	service           time.Duration
	factor            float64
	t0                time.Time
	dropFrom, dropTo  time.Duration // offsets from t0; service takes factor times as long in between
	arrivals          []atomic.Int64
	served, abandoned atomic.Int64

	mu   sync.Mutex
	free []time.Time // when each worker is next free; guarded by mu
}

// arrivalBin is the width of the server's arrival counts.
const arrivalBin = 100 * time.Millisecond

// newQueueServer starts a server for a run beginning at t0 and lasting about
// total; its arrivals are counted per arrivalBin from t0. It speaks HTTP/2
// without TLS (h2c), so that an attempt that times out resets its stream
// instead of closing a connection: what the tables measure is the server's
// queue, not the kernel's connection setup.
func newQueueServer(o *OverloadConfig, t0 time.Time, total time.Duration, dropFrom, dropTo time.Duration) *queueServer {
	s := &queueServer{service: o.Service, factor: o.Factor, t0: t0, dropFrom: dropFrom, dropTo: dropTo,
		arrivals: make([]atomic.Int64, int(total/arrivalBin)+64), free: make([]time.Time, o.Capacity)}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.Protocols = h2c()
	s.srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	s.srv.Start()
	return s
}

// h2c is the protocol set of the scenario's server and client: HTTP/2
// without TLS only.
func h2c() *http.Protocols {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &p
}

// newH2CBase is the base transport every overload candidate wraps.
func newH2CBase() *http.Transport {
	return &http.Transport{Protocols: h2c(), MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 1000}}
}

func (s *queueServer) URL() string { return s.srv.URL + "/item" }

func (s *queueServer) Close() { s.srv.Close() }

// book reserves the first free worker for a request arriving at now and
// returns when its service ends.
func (s *queueServer) book(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, start := firstFree(s.free, now)
	d := s.service
	if off := start.Sub(s.t0); off >= s.dropFrom && off < s.dropTo {
		d = time.Duration(float64(d) * s.factor)
	}
	s.free[w] = start.Add(d)
	return s.free[w]
}

// firstFree returns the worker that is free first and when a request
// arriving at now starts on it: now, or when that worker frees up.
func firstFree(free []time.Time, now time.Time) (w int, start time.Time) {
	for i := range free {
		if free[i].Before(free[w]) {
			w = i
		}
	}
	return w, maxTime(now, free[w])
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *queueServer) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if i := int(now.Sub(s.t0) / arrivalBin); i >= 0 && i < len(s.arrivals) {
		s.arrivals[i].Add(1)
	}
	if !sleepCtx(r.Context(), time.Until(s.book(now))) {
		s.abandoned.Add(1)
		return // the client gave up; its service time is spent all the same
	}
	s.served.Add(1)
	_, _ = io.WriteString(w, "ok") // a client that went away cannot be told
}

// arrivalsPer returns the server's arrivals per window over [0, total),
// windows aligned to t0.
func (s *queueServer) arrivalsPer(window, total time.Duration) []int64 {
	return perWindow(s.arrivals, window, total)
}

// perWindow sums counts kept per arrivalBin into windows over [0, total).
func perWindow(bins []atomic.Int64, window, total time.Duration) []int64 {
	per := int(window / arrivalBin)
	var out []int64
	for b := 0; b+per <= int(total/arrivalBin); b += per {
		var n int64
		for i := b; i < b+per; i++ {
			n += bins[i].Load()
		}
		out = append(out, n)
	}
	return out
}

// overloadCandidate is one client of the overload scenario, built over a
// fresh base for every run.
type overloadCandidate struct {
	name string
	make func(base http.RoundTripper, o *OverloadConfig) *http.Client
}

// overloadRetry is what the retrying peers are asked to do: gotry's default
// attempt count, with a constant backoff near the mean of gotry's default
// (full jitter from 100ms).
var overloadRetry = retryConfig{attempts: transport.DefaultMaxAttempts, backoff: 50 * time.Millisecond}

func overloadCandidates() []overloadCandidate {
	return []overloadCandidate{
		{"no retries", func(b http.RoundTripper, o *OverloadConfig) *http.Client {
			return &http.Client{Transport: b, Timeout: o.Deadline}
		}},
		{"gotry defaults", func(b http.RoundTripper, o *OverloadConfig) *http.Client {
			return &http.Client{Transport: transport.New(b, transport.WithPerAttemptTimeout(o.Deadline))}
		}},
		{"gotry + breaker (open 1s)", func(b http.RoundTripper, o *OverloadConfig) *http.Client {
			return &http.Client{Transport: transport.New(b, transport.WithPerAttemptTimeout(o.Deadline),
				transport.WithBreaker(resilience.BreakerConfig{OpenDuration: time.Second}))}
		}},
		{"gotry + limit", func(b http.RoundTripper, o *OverloadConfig) *http.Client {
			return &http.Client{Transport: transport.New(b, transport.WithPerAttemptTimeout(o.Deadline),
				transport.WithConcurrencyLimit(resilience.ConcurrencyLimit{}))}
		}},
		{"failsafe-go retry + adaptivelimiter", func(b http.RoundTripper, o *OverloadConfig) *http.Client {
			return &http.Client{Transport: failsafeLimited(b, overloadRetry, o.Deadline)}
		}},
		{"go-retryablehttp", func(b http.RoundTripper, o *OverloadConfig) *http.Client {
			c := retryableHTTP(b, overloadRetry).(*retryablehttp.RoundTripper)
			c.Client.HTTPClient.Timeout = o.Deadline // per attempt: it wraps each attempt's client
			return &http.Client{Transport: c}
		}},
	}
}

// failsafeLimited is failsafehttp's retry policy (as failsafeRetry sets it
// up) over its adaptive limiter with default settings, over a per-attempt
// timeout: every attempt needs a permit, and the limiter sees each attempt's
// latency, cut at the deadline.
func failsafeLimited(base http.RoundTripper, rc retryConfig, deadline time.Duration) http.RoundTripper {
	//nolint:bodyclose // no response is obtained here; see failsafeRetry
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(rc.attempts).WithDelay(rc.backoff).
		ReturnLastFailure().
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*http.Response]) { finish(e.LastResult()) }).
		Build()
	return failsafehttp.NewRoundTripper(base, rp,
		adaptivelimiter.NewWithDefaults[*http.Response](), //nolint:bodyclose // a policy, no response
		timeout.New[*http.Response](deadline))             //nolint:bodyclose // a policy, no response
}

// isShed reports a request refused locally, before reaching the server: by
// a concurrency limiter or gotry's breaker.
func isShed(err error) bool {
	return errors.Is(err, resilience.ErrOverloaded) || errors.Is(err, adaptivelimiter.ErrExceeded) || isCircuitOpen(err)
}

// arrivalTimes returns the offsets at which an open-loop client offering
// rate requests per second over d sends them: evenly spaced, or Poisson.
func arrivalTimes(rate float64, d time.Duration, fixed bool, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 23))
	var ts []time.Duration
	for t := 0.0; t < d.Seconds(); {
		ts = append(ts, time.Duration(t*float64(time.Second)))
		if fixed {
			t += 1 / rate
		} else {
			t += rng.ExpFloat64() / rate
		}
	}
	return ts
}

// poissonLoop sends a request at every offset from t0, whatever the
// latency, and returns when all have finished. Unlike openLoop it has no
// bound on what is outstanding: an overloaded client keeps its arrivals.
func poissonLoop(c *http.Client, url string, at []time.Duration, t0 time.Time) []record {
	recs := make([]record, len(at))
	var wg sync.WaitGroup
	for i, off := range at {
		if w := time.Until(t0.Add(off)); w > 0 {
			time.Sleep(w)
		}
		wg.Go(func() {
			r := &recs[i]
			r.start = time.Since(t0)
			resp, err := c.Get(url)
			finish(resp)
			r.end = time.Since(t0)
			r.ok = err == nil && resp.StatusCode == http.StatusOK
			r.shed = isShed(err)
		})
	}
	wg.Wait()
	return recs
}

// OverloadRun is one candidate's run through the drop.
type OverloadRun struct {
	Offered  float64       // requests per second
	Normal   float64       // goodput before the drop, per second
	Goodput  float64       // goodput during the drop, per second
	Recovery time.Duration // from the drop's end until goodput is back at ≥ 90% of Normal; -1: not within the run
	Peak     float64       // the most server arrivals in one window, ÷ the requests started in it
	Shed     int           // requests refused locally
	Requests int
	P50, P99 time.Duration // of successful requests
	Good     []int64       // successful requests per arrivalBin, by when they ended
}

// SteadyRun is one candidate's run without a drop.
type SteadyRun struct {
	Offered, Goodput float64 // per second
	Shed, Requests   int
	P50, P99         time.Duration
}

// OverloadRow is one candidate over every round.
type OverloadRow struct {
	Name   string
	Drop   []OverloadRun
	Steady []SteadyRun
}

// OverloadResult is the overload tables.
type OverloadResult struct {
	Config OverloadConfig
	Rows   []OverloadRow
}

// runOverload runs every candidate through the drop and without it, in
// interleaved rounds, each run against a fresh server.
func runOverload(cfg *Config) (*OverloadResult, error) {
	o := cfg.Overload
	o.setDefaults(cfg.Quick)
	res := &OverloadResult{Config: o}
	cands := overloadCandidates()
	res.Rows = make([]OverloadRow, len(cands))
	for round := range o.Rounds {
		for ci, c := range cands {
			cfg.progress("overload: round %d, %s", round+1, c.name)
			res.Rows[ci].Name = c.name
			res.Rows[ci].Drop = append(res.Rows[ci].Drop, overloadDrop(&o, c, uint64(round)))
		}
		for ci, c := range cands {
			cfg.progress("overload (steady): round %d, %s", round+1, c.name)
			res.Rows[ci].Steady = append(res.Rows[ci].Steady, overloadSteady(&o, c, uint64(round)))
		}
	}
	return res, nil
}

// overloadDrop runs candidate c for o.Before, through the drop, and for
// o.After.
func overloadDrop(o *OverloadConfig, c overloadCandidate, seed uint64) OverloadRun {
	total := o.Before + o.Drop + o.After
	recs, srv := overloadRound(o, c, total, o.Before, o.Before+o.Drop, seed)
	run := OverloadRun{Offered: float64(len(recs)) / total.Seconds(), Requests: len(recs)}
	good := goodputBins(recs, total)
	run.Good = good
	rateIn := func(from, to time.Duration) float64 {
		var n int64
		for i := int(from / arrivalBin); i < int(to/arrivalBin); i++ {
			n += good[i]
		}
		return float64(n) / (to - from).Seconds()
	}
	// Normal is the median bin before the drop, so that a stall of the
	// (busy) machine there does not lower the bar for recovery.
	var before []float64
	for i := int(o.Before / 3 / arrivalBin); i < int(o.Before/arrivalBin); i++ {
		before = append(before, float64(good[i])/arrivalBin.Seconds())
	}
	run.Normal = median(before)
	run.Goodput = rateIn(o.Before, o.Before+o.Drop)
	run.Recovery = recovery(good, o.Before+o.Drop, total, 0.9*run.Normal)
	// Peak compares the server's arrivals with the requests the clients
	// started in the same window: when a stall of the machine holds the
	// driver back, the requests it then starts late do not count as
	// amplification.
	window := min(time.Second, o.Drop/2)
	started := make([]int64, int(total/window)+1)
	for _, r := range recs {
		if i := int(r.start / window); i < len(started) {
			started[i]++
		}
	}
	for i, n := range srv.arrivalsPer(window, total) {
		run.Peak = max(run.Peak, float64(n)/float64(max(started[i], 1)))
	}
	run.Shed, run.P50, run.P99 = summarize(recs)
	return run
}

// overloadSteady runs candidate c at o.Load for o.Steady with no drop.
func overloadSteady(o *OverloadConfig, c overloadCandidate, seed uint64) SteadyRun {
	recs, _ := overloadRound(o, c, o.Steady, 0, 0, seed+1000)
	run := SteadyRun{Offered: float64(len(recs)) / o.Steady.Seconds(), Requests: len(recs)}
	var ok int
	for _, r := range recs {
		if r.ok {
			ok++
		}
	}
	run.Goodput = float64(ok) / o.Steady.Seconds()
	run.Shed, run.P50, run.P99 = summarize(recs)
	return run
}

// overloadRound offers o's load through candidate c to a fresh server for
// total, the drop lasting over [dropFrom, dropTo).
func overloadRound(o *OverloadConfig, c overloadCandidate, total, dropFrom, dropTo time.Duration, seed uint64) ([]record, *queueServer) {
	at := arrivalTimes(o.rate(), total, o.Fixed, seed)
	t0 := time.Now().Add(20 * time.Millisecond)
	srv := newQueueServer(o, t0, total, dropFrom, dropTo)
	defer srv.Close()
	base := newH2CBase()
	defer base.CloseIdleConnections()
	recs := poissonLoop(c.make(base, o), srv.URL(), at, t0)
	return recs, srv
}

// goodputBins counts the successful requests by the arrivalBin they ended in.
func goodputBins(recs []record, total time.Duration) []int64 {
	bins := make([]int64, int(total/arrivalBin)+1)
	for _, r := range recs {
		if i := int(r.end / arrivalBin); r.ok && i < len(bins) {
			bins[i]++
		}
	}
	return bins
}

// recoveryWindow is how long goodput is averaged over when judging recovery.
const recoveryWindow = 500 * time.Millisecond

// recovery returns how long after from goodput got back to threshold per
// second: the start of the first recoveryWindow, in steps of arrivalBin,
// whose goodput averages at least threshold; -1 when none before total does.
// (The first, not the one after which it stays there: a busy machine's
// later hiccups would otherwise count as a slow recovery.)
func recovery(good []int64, from, total time.Duration, threshold float64) time.Duration {
	per := int(recoveryWindow / arrivalBin)
	first, last := int(from/arrivalBin), int(total/arrivalBin)-per
	for b := first; b <= last; b++ {
		var n int64
		for i := b; i < b+per; i++ {
			n += good[i]
		}
		if float64(n)/recoveryWindow.Seconds() >= threshold {
			return time.Duration(b-first) * arrivalBin
		}
	}
	return -1
}

// summarize returns the shed count and the p50 and p99 of the successful
// requests' latencies.
func summarize(recs []record) (shed int, p50, p99 time.Duration) {
	var lat []time.Duration
	for _, r := range recs {
		if r.shed {
			shed++
		}
		if r.ok {
			lat = append(lat, r.end-r.start)
		}
	}
	slices.Sort(lat)
	return shed, percentile(lat, 0.5), percentile(lat, 0.99)
}

// medianOf returns the median of f over runs.
func medianOf[R any](runs []R, f func(R) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return median(xs)
}

// rangeOf prints the median of f over runs with its range when there are
// several.
func rangeOf[R any](runs []R, f func(R) float64, format string) string {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	s := fmt.Sprintf(format, median(xs))
	if len(xs) > 1 && slices.Min(xs) != slices.Max(xs) {
		s += fmt.Sprintf(" ("+format+"–"+format+")", slices.Min(xs), slices.Max(xs))
	}
	return s
}

func (res *OverloadResult) write(w io.Writer) {
	o := res.Config
	drop := o.capacity() / o.Factor
	arrivals := "Poisson"
	if o.Fixed {
		arrivals = "evenly spaced"
	}
	fmt.Fprintf(w, "\n### Overload: a capacity drop\n\n")
	fmt.Fprintf(w, "A loopback server (HTTP/2 without TLS) serves %d requests at a time, %v each (%.0f/s), first come first served; "+
		"a request whose client gave up still costs its service time. Clients offer %.0f%% of that (%.0f requests/s, open loop, %s arrivals), "+
		"every attempt with a %v timeout. After %v the service time is multiplied by %g for %v (the server can serve %.0f/s), "+
		"then returns to normal; the run goes on for %v. Goodput is 200s per second. "+
		"Retrying peers make %d attempts with a %v constant backoff; gotry runs its defaults plus the per-attempt timeout. "+
		"Medians of %d interleaved rounds (range), each run against a fresh server.\n\n",
		o.Capacity, o.Service, o.capacity(), 100*o.Load, o.rate(), arrivals, o.Deadline, o.Before, o.Factor, o.Drop, drop, o.After,
		overloadRetry.attempts, overloadRetry.backoff, o.Rounds)
	fmt.Fprintf(w, "\"Back to normal\" is the time from the drop's end until goodput (over a %v window) is back at ≥ 90%% of what it was before the drop. "+
		"\"Peak arrivals\" is the most requests the server received in one %v window (aligned to the run's start), ÷ the requests the clients started in it. "+
		"\"Shed\" counts requests refused locally (a limiter, or gotry's breaker).\n\n",
		recoveryWindow, min(time.Second, o.Drop/2))
	fmt.Fprintf(w, "| client | goodput during the drop | of the %.0f/s it could serve | back to normal after the drop | peak arrivals ÷ offered | shed | p50 | p99 |\n", drop)
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Rows {
		d := r.Drop
		fmt.Fprintf(w, "| %s | %s/s | %.0f%% | %s | %s | %.2f%% | %s | %s |\n", r.Name,
			rangeOf(d, func(x OverloadRun) float64 { return x.Goodput }, "%.0f"),
			100*medianOf(d, func(x OverloadRun) float64 { return x.Goodput })/drop,
			fmtRecovery(d),
			rangeOf(d, func(x OverloadRun) float64 { return x.Peak }, "%.2f×"),
			100*medianOf(d, func(x OverloadRun) float64 { return float64(x.Shed) / float64(max(x.Requests, 1)) }),
			fmtDur(time.Duration(medianOf(d, func(x OverloadRun) float64 { return float64(x.P50) }))),
			fmtDur(time.Duration(medianOf(d, func(x OverloadRun) float64 { return float64(x.P99) }))))
	}
	fmt.Fprintf(w, "\nThe same load for %v without a drop:\n\n", o.Steady)
	fmt.Fprintf(w, "| client | offered/s | goodput ÷ offered | shed | p50 | p99 |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|\n")
	for _, r := range res.Rows {
		s := r.Steady
		fmt.Fprintf(w, "| %s | %.0f | %.2f%% | %d of %d | %s | %s |\n", r.Name,
			medianOf(s, func(x SteadyRun) float64 { return x.Offered }),
			100*medianOf(s, func(x SteadyRun) float64 { return x.Goodput / x.Offered }),
			int(medianOf(s, func(x SteadyRun) float64 { return float64(x.Shed) })),
			int(medianOf(s, func(x SteadyRun) float64 { return float64(x.Requests) })),
			fmtDur(time.Duration(medianOf(s, func(x SteadyRun) float64 { return float64(x.P50) }))),
			fmtDur(time.Duration(medianOf(s, func(x SteadyRun) float64 { return float64(x.P99) }))))
	}
}

// fmtRecovery prints the median recovery time and its range; a run that
// did not recover counts as infinitely slow.
func fmtRecovery(runs []OverloadRun) string {
	f := func(x OverloadRun) float64 {
		if x.Recovery < 0 {
			return math.Inf(1)
		}
		return x.Recovery.Seconds()
	}
	one := func(v float64) string {
		if math.IsInf(v, 1) {
			return "not within the run"
		}
		return fmt.Sprintf("%.1fs", v)
	}
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	s := one(median(xs))
	if len(xs) > 1 && slices.Min(xs) != slices.Max(xs) {
		s += " (" + one(slices.Min(xs)) + "–" + one(slices.Max(xs)) + ")"
	}
	return s
}
